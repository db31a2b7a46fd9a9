//! Records a source or an operator cannot process, handled as its
//! [`ErrorPolicy`] says ([`weir_model::dead_letter`]): what a source could
//! not decode, an operator's failing records isolated by calling it again
//! on halves of the batch, the budget, the counts and the letters.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weir_host::{BatchContext, ErrorKind, OperatorError, Output};
use weir_model::dead_letter::{ErrorPolicy, Letter, OnError};
use weir_model::format::Format;
use weir_model::metrics::Counters;
use weir_model::{Record, Records};

use crate::operators::StreamOperator;

/// The window of the budget.
const BUDGET_WINDOW: Duration = Duration::from_secs(60);

/// A record a source's format could not decode.
#[derive(Debug, Clone, Default)]
pub struct Undecodable {
    /// Why.
    pub error: String,
    /// Its bytes (a line, a message's value).
    pub raw: Bytes,
    /// The split it came from (a file, `topic/partition`, an address).
    pub split: Option<String>,
    /// Where in the split (a byte offset, a Kafka offset).
    pub offset: Option<u64>,
    /// Its key (a Kafka message's).
    pub key: Option<Bytes>,
    /// Its timestamp, when it had one.
    pub timestamp: Option<i64>,
}

/// A source subtask's undecodable records: with `on-error = "fail"` the
/// first one's error fails the source; otherwise they are kept for the task
/// to take after each batch ([`crate::connectors::Source::take_rejected`]).
#[derive(Debug, Default)]
pub struct Rejects {
    rejecting: bool,
    taken: Vec<Undecodable>,
}

impl Rejects {
    /// As `policy` says.
    pub fn new(policy: &ErrorPolicy) -> Rejects {
        Rejects {
            rejecting: !policy.fails(),
            taken: Vec::new(),
        }
    }

    /// Whether it keeps what cannot be decoded (else it fails on it).
    pub fn rejecting(&self) -> bool {
        self.rejecting
    }

    /// `record` cannot be decoded, for the reason `error` (a message naming
    /// the source's split and position): an error when the source fails on
    /// one, else kept.
    pub fn reject(&mut self, error: anyhow::Error, mut record: Undecodable) -> anyhow::Result<()> {
        if !self.rejecting {
            return Err(error);
        }
        record.error = format!("{error:#}");
        self.taken.push(record);
        Ok(())
    }

    /// How many it holds (a batch's reading stops at its size).
    pub fn len(&self) -> usize {
        self.taken.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.taken.is_empty()
    }

    /// What was rejected since the last call.
    pub fn take(&mut self) -> Vec<Undecodable> {
        std::mem::take(&mut self.taken)
    }
}

/// Process `records`, isolating the records the operator fails on: when a
/// call fails with an error a record can cause (the guest's error, a trap,
/// its deadline, its memory limit), the operator is recovered and called
/// again on each half of the batch, in order, down to single records; a
/// record that fails alone goes to `failed` with its error. A failed call
/// leaves no outputs, state or timer changes behind, so every other record
/// is processed exactly once. Other errors (the host's, a quota on what the
/// instance holds) fail as they are. Once more than `max_failed` records
/// failed it stops, its output incomplete: the caller fails the task (its
/// budget is exceeded) rather than going on isolating.
pub fn process_isolating(
    op: &mut dyn StreamOperator,
    records: Records,
    ctx: BatchContext,
    failed: &mut Vec<(Record, OperatorError)>,
    max_failed: usize,
) -> Result<Output, OperatorError> {
    // Kept to be split if the call fails: a list's records are shared, a
    // packed batch's buffer is copied (at every level of the split: each
    // half is copied out of it and kept again).
    let kept = records.clone();
    let e = match op.process_records(records, ctx) {
        Ok(out) => return Ok(out),
        Err(e) if isolatable(&e) => e,
        Err(e) => return Err(e),
    };
    op.recover(&e)?;
    if kept.len() <= 1 {
        failed.extend(kept.into_list().pop().map(|r| (r, e)));
        return Ok(Output::default());
    }
    let half = kept.len() / 2;
    let mut out = process_isolating(op, kept.pick(0..half), ctx, failed, max_failed)?;
    if failed.len() > max_failed {
        return Ok(out);
    }
    let more = process_isolating(op, kept.pick(half..kept.len()), ctx, failed, max_failed)?;
    out.append(more);
    Ok(out)
}

/// Whether one record can have caused `e`.
fn isolatable(e: &OperatorError) -> bool {
    match e.kind {
        ErrorKind::Guest | ErrorKind::Trap | ErrorKind::Deadline | ErrorKind::MemoryLimit => true,
        // A quota is over what the instance holds or emits in all, the
        // host's failure is not the record's.
        ErrorKind::Quota | ErrorKind::Host => false,
    }
}

/// `out`'s side output `name`, added when it has none.
pub fn side_output<'a>(out: &'a mut Output, name: &str) -> &'a mut Vec<Record> {
    let at = match out.side.iter().position(|(n, _)| n == name) {
        Some(at) => at,
        None => {
            out.side.push((name.to_owned(), Vec::new()));
            out.side.len() - 1
        }
    };
    &mut out.side[at].1
}

/// One source's or operator's subtask's handling of the records it
/// rejects: the budget, the counts, the log and the letters.
pub struct ErrorHandler {
    policy: ErrorPolicy,
    /// `"source"` or `"operator"`.
    who: &'static str,
    name: String,
    subtask: u32,
    /// How an operator's input records are encoded (to write them in a
    /// letter as JSON).
    input: Format,
    /// When its recent rejections were, oldest first (at most the budget).
    recent: VecDeque<Instant>,
}

impl ErrorHandler {
    /// The handler of subtask `subtask` of the source or operator `name`,
    /// `None` when its policy is to fail.
    pub fn new(
        policy: ErrorPolicy,
        source: bool,
        name: &str,
        subtask: u32,
        input: Format,
    ) -> Option<ErrorHandler> {
        (!policy.fails()).then(|| ErrorHandler {
            policy,
            who: if source { "source" } else { "operator" },
            name: name.to_owned(),
            subtask,
            input,
            recent: VecDeque::new(),
        })
    }

    /// How many more records it may reject now, within its budget.
    pub fn remaining(&mut self) -> usize {
        self.forget_old(Instant::now());
        (self.policy.max_per_minute as usize).saturating_sub(self.recent.len())
    }

    fn forget_old(&mut self, now: Instant) {
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= BUDGET_WINDOW)
        {
            self.recent.pop_front();
        }
    }

    /// A record its source could not decode: counted, and its letter when
    /// it goes to the dead-letter output.
    pub fn undecodable(
        &mut self,
        u: Undecodable,
        counters: &Counters,
    ) -> anyhow::Result<Option<Record>> {
        self.admit(&u.error, counters)?;
        if self.policy.on_error != OnError::DeadLetter {
            return Ok(None);
        }
        let mut letter = self.letter(u.error);
        letter.split = u.split;
        letter.offset = u.offset;
        letter.raw = Some(String::from_utf8_lossy(&u.raw).into_owned());
        letter.key = u.key.map(|k| String::from_utf8_lossy(&k).into_owned());
        letter.timestamp = u.timestamp;
        Ok(Some(Record {
            key: None,
            value: Bytes::from(letter.to_json()),
            timestamp: u.timestamp,
        }))
    }

    /// A record the operator failed on, alone: counted, and its letter when
    /// it goes to the dead-letter output.
    pub fn failed(
        &mut self,
        record: &Record,
        e: &OperatorError,
        counters: &Counters,
    ) -> anyhow::Result<Option<Record>> {
        let mut error = e.to_string();
        // The subtask is the letter's: what matters is how it failed.
        if let Some(rest) = error.strip_prefix(&e.ident.to_string()) {
            error = rest.trim_start().to_owned();
        }
        self.admit(&error, counters)?;
        if self.policy.on_error != OnError::DeadLetter {
            return Ok(None);
        }
        let mut letter = self.letter(error);
        let mut json = Vec::new();
        match self.input.write_json(&record.value, &mut json) {
            Ok(()) => letter.record = Letter::json(&json),
            Err(_) => json.clear(),
        }
        if letter.record.is_none() {
            // Not JSON after all: kept as its bytes.
            letter.raw = Some(String::from_utf8_lossy(&record.value).into_owned());
        }
        letter.timestamp = record.timestamp;
        Ok(Some(Record {
            key: None,
            value: Bytes::from(letter.to_json()),
            timestamp: record.timestamp,
        }))
    }

    fn letter(&self, error: String) -> Letter {
        Letter::new(
            &self.name,
            self.who,
            self.subtask,
            error,
            weir_model::now_ms(),
        )
    }

    /// Count one rejection against the budget: an error when it is the
    /// budget's `max + 1`-th within a minute.
    fn admit(&mut self, error: &str, counters: &Counters) -> anyhow::Result<()> {
        let now = Instant::now();
        self.forget_old(now);
        let max = self.policy.max_per_minute;
        if self.recent.len() as u64 >= max {
            anyhow::bail!(
                "{} `{}` rejected more than {max} record{} within a minute (on-error = \"{}\", max-errors-per-minute = {max}); the last: {error}",
                self.who,
                self.name,
                if max == 1 { "" } else { "s" },
                self.policy.on_error.name(),
            );
        }
        self.recent.push_back(now);
        let counter = match self.policy.on_error {
            OnError::DeadLetter => &counters.dead_letters,
            _ => &counters.records_skipped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "{} `{}`[{}] {} a record: {error}",
            self.who,
            self.name,
            self.subtask,
            match self.policy.on_error {
                OnError::DeadLetter => "sent to its dead-letter output",
                _ => "skipped",
            }
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_host::{BatchOutput, TaskIdent};
    use weir_model::codec::Codec;

    /// Fails a call whose batch holds a value starting with `bad` (as
    /// `kind`); otherwise passes the batch on and keeps what it saw.
    struct Picky {
        kind: ErrorKind,
        calls: usize,
        recovered: usize,
        applied: Vec<String>,
        /// Per call, whether its batch was packed.
        packed: Vec<bool>,
        /// A failed call left it unusable until it is recovered.
        poisoned: bool,
    }

    impl Picky {
        fn new(kind: ErrorKind) -> Picky {
            Picky {
                kind,
                calls: 0,
                recovered: 0,
                applied: Vec::new(),
                packed: Vec::new(),
                poisoned: false,
            }
        }
    }

    impl StreamOperator for Picky {
        fn process(
            &mut self,
            batch: Vec<Record>,
            ctx: BatchContext,
        ) -> Result<BatchOutput, OperatorError> {
            self.process_records(Records::List(batch), ctx)
                .map(BatchOutput::from)
        }

        /// Takes a batch as it comes and passes it on as it came (a packed
        /// batch stays packed).
        fn process_records(
            &mut self,
            batch: Records,
            _: BatchContext,
        ) -> Result<Output, OperatorError> {
            self.calls += 1;
            self.packed.push(matches!(batch, Records::Packed(_)));
            assert!(!self.poisoned, "called again before it was recovered");
            if let Some(bad) = batch.iter().find(|r| r.value.starts_with(b"bad")) {
                self.poisoned = true;
                return Err(OperatorError {
                    ident: TaskIdent::default(),
                    kind: self.kind,
                    message: format!("cannot take {}", String::from_utf8_lossy(bad.value)),
                    guest_output: Vec::new(),
                });
            }
            self.applied.extend(
                batch
                    .iter()
                    .map(|r| String::from_utf8_lossy(r.value).into_owned()),
            );
            Ok(Output {
                main: batch,
                side: vec![("seen".into(), vec![Record::value("x")])],
            })
        }

        fn recover(&mut self, e: &OperatorError) -> Result<(), OperatorError> {
            assert_eq!(e.kind, self.kind);
            self.recovered += 1;
            self.poisoned = false;
            Ok(())
        }
    }

    /// Record `i`: the value `i` (`bad<i>` when `bad` holds `i`), the key
    /// `k<i>` and the time `-i`.
    fn values(n: usize, bad: &[usize]) -> Vec<Record> {
        (0..n)
            .map(|i| Record {
                key: Some(format!("k{i}").into()),
                value: if bad.contains(&i) {
                    format!("bad{i}")
                } else {
                    format!("{i}")
                }
                .into(),
                timestamp: Some(-(i as i64)),
            })
            .collect()
    }

    /// The records as a list and packed.
    fn both_ways(records: Vec<Record>) -> [Records; 2] {
        let packed = Records::Packed(weir_model::PackedRecords::from_records(&records).unwrap());
        [Records::List(records), packed]
    }

    #[test]
    fn the_records_a_call_fails_on_are_isolated_and_the_others_processed_once_in_order() {
        let kinds = [
            ErrorKind::Guest,
            ErrorKind::Trap,
            ErrorKind::Deadline,
            ErrorKind::MemoryLimit,
        ];
        for (kind, input) in kinds
            .into_iter()
            .flat_map(|k| both_ways(values(100, &[0, 3, 4, 50, 99])).map(|i| (k, i)))
        {
            let mut op = Picky::new(kind);
            let bad = [0, 3, 4, 50, 99];
            let mut failed = Vec::new();
            let packed = matches!(input, Records::Packed(_));
            let out = process_isolating(
                &mut op,
                input,
                BatchContext::default(),
                &mut failed,
                usize::MAX,
            )
            .unwrap();
            let good: Vec<String> = (0..100)
                .filter(|i| !bad.contains(i))
                .map(|i| i.to_string())
                .collect();
            assert_eq!(op.applied, good, "each good record once, in order");
            // Every call, the halves' too, took the batch as it came, and
            // the halves' outputs were joined as they left.
            assert!(op.packed.iter().all(|&p| p == packed), "{:?}", op.packed);
            assert_eq!(matches!(out.main, Records::Packed(_)), packed);
            let all = values(100, &bad);
            let want: Vec<Record> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| !bad.contains(i))
                .map(|(_, r)| r.clone())
                .collect();
            assert_eq!(out.main.into_list(), want, "keys, values and times kept");
            // The side outputs of every successful call, merged by name.
            assert_eq!(out.side.len(), 1);
            assert_eq!(out.side[0].1.len(), op.calls - op.recovered);
            let failed: Vec<(Record, String)> =
                failed.into_iter().map(|(r, e)| (r, e.message)).collect();
            assert_eq!(
                failed,
                bad.iter()
                    .map(|&i| (all[i].clone(), format!("cannot take bad{i}")))
                    .collect::<Vec<_>>()
            );
            // A failed call is followed by a recovery; far fewer calls than
            // records.
            assert!(op.recovered >= bad.len() && op.calls < 60, "{}", op.calls);
        }
    }

    #[test]
    fn errors_no_record_causes_fail_the_call() {
        for kind in [ErrorKind::Host, ErrorKind::Quota] {
            let mut op = Picky::new(kind);
            let mut failed = Vec::new();
            let e = process_isolating(
                &mut op,
                Records::List(values(10, &[5])),
                BatchContext::default(),
                &mut failed,
                usize::MAX,
            )
            .unwrap_err();
            assert_eq!(e.kind, kind);
            assert!(failed.is_empty() && op.applied.is_empty());
            assert_eq!((op.calls, op.recovered), (1, 0));
        }
    }

    #[test]
    fn isolating_stops_once_more_records_failed_than_the_budget_allows() {
        let mut op = Picky::new(ErrorKind::Trap);
        let mut failed = Vec::new();
        let all_bad: Vec<usize> = (0..1024).collect();
        process_isolating(
            &mut op,
            Records::List(values(1024, &all_bad)),
            BatchContext::default(),
            &mut failed,
            3,
        )
        .unwrap();
        assert_eq!(failed.len(), 4, "one past the budget");
        // Not the 2,047 calls isolating every record would take.
        assert!(op.calls < 40, "{}", op.calls);
    }

    fn policy(on_error: OnError, max_per_minute: u64) -> ErrorPolicy {
        ErrorPolicy {
            on_error,
            max_per_minute,
        }
    }

    #[test]
    fn letters_say_what_failed_where_and_a_budget_bounds_them() {
        let counters = Counters::default();
        let mut h = ErrorHandler::new(
            policy(OnError::DeadLetter, 2),
            true,
            "orders",
            1,
            Format::of(Codec::Json),
        )
        .unwrap();
        let u = Undecodable {
            error: "orders.jsonl (the line at byte 7): EOF".into(),
            raw: Bytes::from_static(b"{\"a\":"),
            split: Some("orders.jsonl".into()),
            offset: Some(7),
            ..Undecodable::default()
        };
        let letter = h.undecodable(u.clone(), &counters).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&letter.value).unwrap();
        assert_eq!(v["source"], "orders");
        assert_eq!(v["subtask"], 1);
        assert_eq!(v["split"], "orders.jsonl");
        assert_eq!(v["offset"], 7);
        assert_eq!(v["raw"], "{\"a\":");
        assert_eq!(v["error"], "orders.jsonl (the line at byte 7): EOF");
        assert!(v.get("operator").is_none() && v.get("record").is_none());
        h.undecodable(u.clone(), &counters).unwrap();
        let e = h.undecodable(u, &counters).unwrap_err().to_string();
        assert!(
            e.contains("source `orders` rejected more than 2 records within a minute"),
            "{e}"
        );
        assert_eq!(counters.dead_letters.load(Ordering::Relaxed), 2);

        // An operator's record, in its input's codec, is written as JSON.
        let mut h = ErrorHandler::new(
            policy(OnError::Skip, 10),
            false,
            "parse",
            0,
            Format::of(Codec::Msgpack),
        )
        .unwrap();
        let e = OperatorError {
            ident: TaskIdent::default(),
            kind: ErrorKind::Trap,
            message: "boom".into(),
            guest_output: vec!["panicked".into()],
        };
        let record = Record::value(vec![0x81, 0xa1, b'a', 0x01]);
        assert!(h.failed(&record, &e, &counters).unwrap().is_none());
        assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 1);
        let mut h = ErrorHandler::new(
            policy(OnError::DeadLetter, 10),
            false,
            "parse",
            0,
            Format::of(Codec::Msgpack),
        )
        .unwrap();
        let letter = h.failed(&record, &e, &counters).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&letter.value).unwrap();
        assert_eq!(v["operator"], "parse");
        assert_eq!(v["record"], serde_json::json!({"a": 1}));
        let error = v["error"].as_str().unwrap();
        assert!(
            error.starts_with("trapped: boom") && error.contains("guest: panicked"),
            "{error}"
        );
        assert!(
            ErrorHandler::new(
                ErrorPolicy::default(),
                false,
                "x",
                0,
                Format::of(Codec::Json)
            )
            .is_none()
        );
    }
}
