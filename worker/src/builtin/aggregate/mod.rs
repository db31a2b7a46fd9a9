//! Running aggregates per key: `count`, `sum`, `min`, `max`, `avg`.
//!
//! Each key's accumulator is a value state (`weir.builtin.<function>`) on
//! the task's backend, so it is checkpointed and restored like any keyed
//! state; a batch reads its keys' accumulators in one bulk read and writes
//! them back in one batch. Output records are
//! `{"key": <key>, "<function>": <value>}`: the key as the JSON it was
//! extracted as (a string, if it is not JSON), the value a whole number
//! while every input was one (`count` always), `avg` a floating-point
//! number; on a typed stream, rows of that record's type ([`output`]).
//!
//! A record whose field is missing or `null` counts for `count` without a
//! field, and is skipped by the others (as SQL's aggregates skip nulls); a
//! field that is not a number fails the task, naming the record.

mod output;

use std::hash::BuildHasher;

use rustc_hash::FxBuildHasher;

use weir_host::{BatchContext, BatchOutput, OperatorError, TaskIdent};
use weir_model::KeyBy;
use weir_model::builtin::accumulator::StoredAccumulator;
use weir_model::builtin::{AggregateFunction, Emit};
use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_model::{Record, RecordBuffer, Records};
use weir_state::{Packed, PackedPuts, StateBackend, StateKind, StateOp};

use super::fields::{FieldReader, NotNumber};
use super::{Number, excerpt, input_error, state_error};
use crate::operators::StreamOperator;
pub(crate) use output::Results;
use weir_host::Output;

/// One key's (or window's) accumulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Acc {
    Count(u64),
    /// The sum so far (`None`: no value yet).
    Sum(Option<Number>),
    Min(Option<Number>),
    Max(Option<Number>),
    /// Sum and count.
    Avg(f64, u64),
}

impl Acc {
    pub(crate) fn new(f: AggregateFunction) -> Acc {
        match f {
            AggregateFunction::Count => Acc::Count(0),
            AggregateFunction::Sum => Acc::Sum(None),
            AggregateFunction::Min => Acc::Min(None),
            AggregateFunction::Max => Acc::Max(None),
            AggregateFunction::Avg => Acc::Avg(0.0, 0),
        }
    }

    /// Add a record's value (`None`: the record has no value for the field,
    /// or `count` reads none).
    pub(crate) fn add(&mut self, v: Option<Number>, counts_null: bool) {
        match (self, v) {
            (Acc::Count(n), Some(_)) => *n += 1,
            (Acc::Count(n), None) if counts_null => *n += 1,
            (_, None) => {}
            (Acc::Sum(s), Some(v)) => {
                *s = Some(match (*s, v) {
                    (None, v) => v,
                    (Some(Number::Int(a)), Number::Int(b)) => match a.checked_add(b) {
                        Some(c) => Number::Int(c),
                        None => Number::Float(a as f64 + b as f64),
                    },
                    (Some(a), b) => Number::Float(a.as_f64() + b.as_f64()),
                })
            }
            (Acc::Min(m), Some(v)) => *m = Some(pick(*m, v, true)),
            (Acc::Max(m), Some(v)) => *m = Some(pick(*m, v, false)),
            (Acc::Avg(s, n), Some(v)) => {
                *s += v.as_f64();
                *n += 1;
            }
        }
    }

    /// Fold another accumulator of the same function in.
    pub(crate) fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Avg(s, n), Acc::Avg(t, m)) => {
                *s += t;
                *n += m;
            }
            (
                me @ (Acc::Sum(_) | Acc::Min(_) | Acc::Max(_)),
                Acc::Sum(v) | Acc::Min(v) | Acc::Max(v),
            ) => me.add(v, false),
            _ => {}
        }
    }

    /// Its value as JSON.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match *self {
            Acc::Count(n) => Number::Int(n as i64).write(out),
            Acc::Sum(v) | Acc::Min(v) | Acc::Max(v) => match v {
                Some(v) => v.write(out),
                None => out.extend_from_slice(b"null"),
            },
            Acc::Avg(_, 0) => out.extend_from_slice(b"null"),
            Acc::Avg(s, n) => Number::Float(s / n as f64).write(out),
        }
    }

    /// Append its encoding as stored ([`StoredAccumulator`]) to `out`.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        let number = |v: Option<Number>| match v {
            None => StoredAccumulator::Empty,
            Some(Number::Int(i)) => StoredAccumulator::Int(i),
            Some(Number::Float(f)) => StoredAccumulator::Float(f),
        };
        match *self {
            Acc::Count(n) => StoredAccumulator::Count(n),
            Acc::Sum(v) | Acc::Min(v) | Acc::Max(v) => number(v),
            Acc::Avg(s, n) => StoredAccumulator::Avg(s, n),
        }
        .encode_into(out);
    }

    /// An accumulator of `f` read back (`None`: the bytes are not one of
    /// `f`'s).
    pub(crate) fn decode(f: AggregateFunction, bytes: &[u8]) -> Option<Acc> {
        use AggregateFunction as F;
        use StoredAccumulator as S;
        let stored = S::decode(bytes)?;
        let number = match stored {
            S::Int(i) => Some(Number::Int(i)),
            S::Float(x) => Some(Number::Float(x)),
            _ => None,
        };
        Some(match (f, stored) {
            (F::Count, S::Count(n)) => Acc::Count(n),
            (F::Avg, S::Avg(s, n)) => Acc::Avg(s, n),
            (F::Count | F::Avg, _) | (_, S::Count(_) | S::Avg(..)) => return None,
            (F::Sum, _) => Acc::Sum(number),
            (F::Min, _) => Acc::Min(number),
            (F::Max, _) => Acc::Max(number),
        })
    }
}

/// The smaller (or larger) of `old` and `new`; whole numbers compare as
/// whole numbers (exactly, beyond a float's precision), and once either is
/// a float the result is one.
fn pick(old: Option<Number>, new: Number, smaller: bool) -> Number {
    let replace = match (old, new) {
        (None, _) => true,
        (Some(Number::Int(a)), Number::Int(b)) => {
            if smaller {
                b < a
            } else {
                b > a
            }
        }
        (Some(a), b) => {
            if smaller {
                b.as_f64() < a.as_f64()
            } else {
                b.as_f64() > a.as_f64()
            }
        }
    };
    let picked = match old {
        Some(old) if !replace => old,
        _ => new,
    };
    match (old, new) {
        (Some(Number::Float(_)), _) | (_, Number::Float(_)) => Number::Float(picked.as_f64()),
        _ => picked,
    }
}

/// What a record adds to an aggregate of a field, read from the input's
/// records in their format.
pub(crate) struct ValueOf {
    /// The field's pointer (`None`: the aggregate reads no field).
    field: Option<String>,
    /// Whether the aggregate computes with the field (all but `count`,
    /// which counts the records whose field is not null, of any type).
    numeric: bool,
    reader: FieldReader,
    input: Format,
}

impl ValueOf {
    /// The values of `field` in records in `input`, for `function`.
    pub(crate) fn new(
        function: AggregateFunction,
        field: Option<String>,
        input: Format,
    ) -> ValueOf {
        let pointers: Vec<String> = field.iter().cloned().collect();
        ValueOf {
            reader: FieldReader::new(&pointers, &input),
            numeric: function != AggregateFunction::Count,
            field,
            input,
        }
    }

    /// Whether the aggregate reads a field (else [`ValueOf::of`] is `None`
    /// for every record).
    pub(crate) fn reads(&self) -> bool {
        self.field.is_some()
    }

    /// The value `r` adds (`None`: it has none, or the aggregate reads no
    /// field); `scratch` holds what a row is read through, when it must be.
    pub(crate) fn of(
        &self,
        value: &[u8],
        scratch: &mut Vec<u8>,
        ident: &TaskIdent,
    ) -> Result<Option<Number>, OperatorError> {
        let Some(field) = &self.field else {
            return Ok(None);
        };
        let fields = self.reader.read(value, scratch).map_err(|e| {
            input_error(
                ident,
                format!("a record {e}: {}", self.input.excerpt(value)),
            )
        })?;
        match fields[0] {
            None => Ok(None),
            Some(f) if !self.numeric => Ok((!f.is_null()).then_some(Number::Int(1))),
            Some(f) => f.number().map_err(|e| {
                let why = match e {
                    NotNumber::Other => "is not a number".to_owned(),
                    NotNumber::Malformed(e) => format!("is in a malformed row ({e})"),
                };
                input_error(
                    ident,
                    format!(
                        "field {field} of a record {why}: {}",
                        self.input.excerpt(value)
                    ),
                )
            }),
        }
    }
}

/// What a keyed built-in's keys are, to write them into its output as
/// JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyText {
    /// Compact JSON already (taken by a JSON pointer from JSON).
    Json,
    /// MessagePack (taken from rows).
    Msgpack,
    /// The records' own keys: JSON when they parse as JSON, else text.
    Raw,
}

impl KeyText {
    /// How the keys of a built-in keyed by `key_by` read, from an input in
    /// `input`.
    pub(crate) fn of(key_by: Option<&KeyBy>, input: &Format) -> KeyText {
        match key_by {
            // A row stream's keys are MessagePack, whoever made them.
            Some(_) if input.codec == Codec::Row => KeyText::Msgpack,
            Some(KeyBy::Pointer(_)) => KeyText::Json,
            _ => KeyText::Raw,
        }
    }

    /// Append `key` as JSON.
    pub(crate) fn write(self, out: &mut Vec<u8>, key: &[u8]) {
        match self {
            KeyText::Json => out.extend_from_slice(key),
            KeyText::Msgpack => {
                let start = out.len();
                if weir_model::msgpack::to_json(key, out).is_err() {
                    // Not the runtime's MessagePack: shown as text.
                    out.truncate(start);
                    KeyText::Raw.write(out, key);
                }
            }
            KeyText::Raw => {
                if serde_json::from_slice::<serde::de::IgnoredAny>(key).is_ok() {
                    out.extend_from_slice(key);
                } else {
                    let _ = serde_json::to_writer(&mut *out, &String::from_utf8_lossy(key));
                }
            }
        }
    }
}

/// A running aggregate per key.
pub(super) struct RunningAggregate {
    function: AggregateFunction,
    value_of: ValueOf,
    counts_null: bool,
    emit: Emit,
    ident: TaskIdent,
    backend: Box<dyn StateBackend>,
    state: u32,
    results: Results,
    /// A batch's keys' indexes by their hash (empty between batches).
    index: hashbrown::HashTable<usize>,
}

impl RunningAggregate {
    pub(super) fn new(
        function: AggregateFunction,
        value_of: ValueOf,
        emit: Emit,
        ident: TaskIdent,
        mut backend: Box<dyn StateBackend>,
        results: Results,
        ttl_ms: Option<u64>,
    ) -> Result<RunningAggregate, OperatorError> {
        let ttl = ttl_ms.map(|ttl_ms| weir_state::ttl::StateTtl {
            ttl_ms,
            refresh_on_read: false,
        });
        let state = backend
            .declare_ttl(
                &format!("weir.builtin.{}", function.name()),
                StateKind::Value,
                ttl,
            )
            .map_err(|e| state_error(&ident, anyhow::anyhow!(e)))?;
        Ok(RunningAggregate {
            function,
            counts_null: value_of.field.is_none(),
            value_of,
            emit,
            ident,
            backend,
            state,
            results,
            index: hashbrown::HashTable::new(),
        })
    }

    /// An output record for `key` with its accumulator's value.
    fn output(
        &self,
        out: &mut RecordBuffer,
        key: &[u8],
        acc: &Acc,
        timestamp: Option<i64>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), OperatorError> {
        out.try_push(None, timestamp, |value| {
            self.results.write(value, key, None, acc, scratch)
        })
        .map_err(|e| input_error(&self.ident, format!("key {}: {e}", excerpt(key))))
    }
}

impl RunningAggregate {
    /// Add a batch's records to their keys' aggregates; what it emits.
    fn aggregate(&mut self, batch: &Records) -> Result<RecordBuffer, OperatorError> {
        // The batch's keys, each once, in order of first appearance, found
        // through a table of their indexes kept from batch to batch.
        // (Bounded by the batch: a hash without a seed costs little here.)
        let mut index = std::mem::take(&mut self.index);
        index.clear();
        let hash = |key: &[u8]| FxBuildHasher.hash_one(key);
        let mut keys: Vec<&[u8]> = Vec::with_capacity(batch.len());
        let mut of_record = Vec::with_capacity(batch.len());
        for r in batch.iter() {
            let key = r.key.ok_or_else(|| {
                input_error(
                    &self.ident,
                    "a record reached a keyed operator without its key".into(),
                )
            })?;
            let h = hash(key);
            let i = match index.find(h, |&j| keys[j] == key) {
                Some(&j) => j,
                None => {
                    keys.push(key);
                    let j = keys.len() - 1;
                    index.insert_unique(h, j, |&j| hash(keys[j]));
                    j
                }
            };
            of_record.push(i);
        }
        self.index = index;
        // Their accumulators, read into one buffer.
        let n = keys.len();
        // (An accumulator is 9 bytes or 17.)
        let (mut stored, mut ends, mut present) = (
            Vec::with_capacity(n * 17),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        self.backend
            .read_values(
                &[self.state],
                &mut keys.iter().copied(),
                &mut stored,
                &mut ends,
                &mut present,
            )
            .map_err(|e| state_error(&self.ident, e))?;
        let mut accs = Vec::with_capacity(keys.len());
        let mut start = 0;
        for (i, key) in keys.iter().enumerate() {
            let bytes = &stored[start..ends[i] as usize];
            start = ends[i] as usize;
            accs.push(match present[i] {
                false => Acc::new(self.function),
                true => Acc::decode(self.function, bytes).ok_or_else(|| {
                    state_error(
                        &self.ident,
                        anyhow::anyhow!(
                            "a stored accumulator of key {:?} is corrupt",
                            excerpt(key)
                        ),
                    )
                })?,
            });
        }
        let counts_null = self.counts_null;
        let outputs = match self.emit {
            Emit::Record => batch.len(),
            Emit::Batch => keys.len(),
        };
        let mut main = RecordBuffer::with_capacity(outputs, outputs * 40);
        let mut last_timestamp = vec![None; keys.len()];
        let (mut scratch, mut key_scratch) = (Vec::new(), Vec::new());
        let reads = self.value_of.reads();
        for (r, &i) in batch.iter().zip(&of_record) {
            let v = match reads {
                true => self.value_of.of(r.value, &mut scratch, &self.ident)?,
                false => None,
            };
            accs[i].add(v, counts_null);
            match self.emit {
                Emit::Record => {
                    self.output(&mut main, keys[i], &accs[i], r.timestamp, &mut key_scratch)?
                }
                Emit::Batch => last_timestamp[i] = r.timestamp,
            }
        }
        if self.emit == Emit::Batch {
            for (i, k) in keys.iter().enumerate() {
                self.output(&mut main, k, &accs[i], last_timestamp[i], &mut key_scratch)?;
            }
        }
        // Written back as one packed put.
        let (mut key_bytes, mut key_ends) = (Vec::new(), Vec::with_capacity(keys.len()));
        let (mut values, mut value_ends) = (Vec::with_capacity(keys.len() * 17), Vec::new());
        for (key, acc) in keys.iter().zip(&accs) {
            key_bytes.extend_from_slice(key);
            key_ends.push(key_bytes.len() as u32);
            acc.encode_into(&mut values);
            value_ends.push(values.len() as u32);
        }
        let puts = Packed::new(key_bytes, key_ends)
            .and_then(|keys| PackedPuts::new(self.state, keys, Packed::new(values, value_ends)?))
            .map_err(|e| state_error(&self.ident, anyhow::anyhow!(e)))?;
        self.backend
            .apply_all(vec![StateOp::PutValues(puts)], Vec::new())
            .map_err(|e| state_error(&self.ident, e))?;
        Ok(main)
    }
}

impl StreamOperator for RunningAggregate {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        Ok(BatchOutput {
            main: self.aggregate(&Records::List(batch))?.finish(),
            side: Vec::new(),
        })
    }

    fn process_records(
        &mut self,
        batch: Records,
        _: BatchContext,
    ) -> Result<Output, OperatorError> {
        // What it emits leaves in one buffer.
        Ok(Output {
            main: self.aggregate(&batch)?.finish_records(),
            side: Vec::new(),
        })
    }

    fn metrics(&self) -> weir_host::InstanceMetrics {
        weir_host::InstanceMetrics {
            state: self.backend.size(),
            ..Default::default()
        }
    }

    fn snapshot(
        &mut self,
        dir: &std::path::Path,
        portable: bool,
    ) -> anyhow::Result<Option<weir_state::snapshot::LocalSnapshot>> {
        weir_state::snapshot::take(&mut *self.backend, dir, portable).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_all(f: AggregateFunction, values: &[Option<Number>]) -> Acc {
        let mut a = Acc::new(f);
        for v in values {
            a.add(*v, false);
        }
        a
    }

    fn json(a: &Acc) -> String {
        let mut out = Vec::new();
        a.write(&mut out);
        String::from_utf8(out).unwrap()
    }

    /// `count` of a field counts the records where it is not null,
    /// whatever it is; the others compute with numbers and fail on the rest.
    #[test]
    fn count_of_a_field_counts_what_is_not_null_of_any_type() {
        let record = |json: &str| Record {
            key: None,
            value: json.as_bytes().to_vec().into(),
            timestamp: None,
        };
        let ident = TaskIdent::default();
        let mut scratch = Vec::new();
        let count = ValueOf::new(
            AggregateFunction::Count,
            Some("/s".into()),
            Format::default(),
        );
        let sum = ValueOf::new(AggregateFunction::Sum, Some("/s".into()), Format::default());
        for (json, counted) in [
            (r#"{"s": "x"}"#, true),
            (r#"{"s": [1]}"#, true),
            (r#"{"s": 0}"#, true),
            (r#"{"s": null}"#, false),
            ("{}", false),
        ] {
            let v = count.of(&record(json).value, &mut scratch, &ident).unwrap();
            assert_eq!(v.is_some(), counted, "{json}");
        }
        let e = sum
            .of(&record(r#"{"s": "x"}"#).value, &mut scratch, &ident)
            .unwrap_err();
        assert!(e.message.contains("is not a number"), "{e}");
    }

    /// A running count over batches whose keys repeat, in JSON and in
    /// rows: each record's update counts the records of its key so far,
    /// across batches; `emit = "batch"` gives each key's last once, in
    /// order of first appearance.
    #[test]
    fn a_batch_s_repeated_keys_count_on_from_the_batch_before() {
        use std::sync::Arc;
        use weir_model::types::row::Schema;
        let packed = |k: &str| {
            let mut out = Vec::new();
            weir_model::msgpack::from_json(k.as_bytes(), &mut out).unwrap();
            out
        };
        let batch = |keys: &[&str]| {
            Records::List(
                keys.iter()
                    .map(|k| Record {
                        key: Some(packed(k).into()),
                        value: Vec::new().into(),
                        timestamp: None,
                    })
                    .collect(),
            )
        };
        let schema = Arc::new(Schema::new("{key: string, count: i64}".parse().unwrap()));
        let rows = Format {
            codec: Codec::Row,
            schema: Some(schema.clone()),
        };
        for (emit, output, expected) in [
            (
                Emit::Record,
                Format::default(),
                vec![
                    r#"{"key":"a","count":1}"#,
                    r#"{"key":"b","count":1}"#,
                    r#"{"key":"a","count":2}"#,
                    r#"{"key":"a","count":3}"#,
                    r#"{"key":"c","count":1}"#,
                    r#"{"key":"b","count":2}"#,
                    r#"{"key":"b","count":3}"#,
                    r#"{"key":"a","count":4}"#,
                ],
            ),
            (
                Emit::Batch,
                rows.clone(),
                vec![
                    r#"{"key":"a","count":3}"#,
                    r#"{"key":"b","count":2}"#,
                    r#"{"key":"c","count":1}"#,
                    r#"{"key":"b","count":3}"#,
                    r#"{"key":"a","count":4}"#,
                ],
            ),
        ] {
            let results = Results::new(
                AggregateFunction::Count,
                KeyText::Msgpack,
                None,
                &output,
                false,
            )
            .unwrap();
            let mut count = RunningAggregate::new(
                AggregateFunction::Count,
                ValueOf::new(AggregateFunction::Count, None, Format::default()),
                emit,
                TaskIdent::default(),
                Box::new(weir_state::MemoryStateBackend::new()),
                results,
                None,
            )
            .unwrap();
            let mut written = Vec::new();
            for keys in [
                &[r#""a""#, r#""b""#, r#""a""#, r#""a""#, r#""c""#, r#""b""#][..],
                &[r#""b""#, r#""a""#],
            ] {
                let out = count.aggregate(&batch(keys)).unwrap().finish_records();
                for r in out.iter() {
                    let mut json = Vec::new();
                    match output.codec {
                        Codec::Row => weir_model::types::row::json::write_value(
                            &schema.node,
                            r.value,
                            &mut json,
                        )
                        .unwrap(),
                        _ => json.extend_from_slice(r.value),
                    }
                    written.push(String::from_utf8(json).unwrap());
                }
            }
            assert_eq!(written, expected, "{emit:?}");
        }
    }

    #[test]
    fn keys_are_written_as_json_whatever_they_were_read_as() {
        let rows = Format {
            codec: Codec::Row,
            schema: None,
        };
        let pointer = KeyBy::Pointer("/k".into());
        let write = |keys: KeyText, key: &[u8]| {
            let mut out = Vec::new();
            keys.write(&mut out, key);
            String::from_utf8(out).unwrap()
        };
        let of_rows = KeyText::of(Some(&pointer), &rows);
        assert_eq!(of_rows, KeyText::Msgpack);
        assert_eq!(KeyText::of(Some(&KeyBy::Value), &rows), KeyText::Msgpack);
        assert_eq!(write(of_rows, &[0xa3, b'a', b'n', b'a']), r#""ana""#);
        assert_eq!(write(of_rows, &[0x81, 0xa1, b'a', 0x07]), r#"{"a":7}"#);
        let of_json = KeyText::of(Some(&pointer), &Format::default());
        assert_eq!(of_json, KeyText::Json);
        assert_eq!(write(of_json, br#""ana""#), r#""ana""#);
        // The records' own keys: MessagePack on a row stream too.
        assert_eq!(KeyText::of(Some(&KeyBy::Key), &rows), KeyText::Msgpack);
        let own = KeyText::of(Some(&KeyBy::Key), &Format::default());
        assert_eq!(write(own, b"plain text"), r#""plain text""#);
    }

    #[test]
    fn accumulators_follow_sql() {
        use Number::{Float, Int};
        let vs = [Some(Int(3)), None, Some(Int(-7)), Some(Int(10))];
        assert_eq!(json(&add_all(AggregateFunction::Sum, &vs)), "6");
        assert_eq!(json(&add_all(AggregateFunction::Min, &vs)), "-7");
        assert_eq!(json(&add_all(AggregateFunction::Max, &vs)), "10");
        assert_eq!(json(&add_all(AggregateFunction::Avg, &vs)), "2.0");
        assert_eq!(json(&add_all(AggregateFunction::Count, &vs)), "3");
        let mut all = Acc::new(AggregateFunction::Count);
        for v in vs {
            all.add(v, true);
        }
        assert_eq!(json(&all), "4", "count(*) counts every record");
        assert_eq!(json(&add_all(AggregateFunction::Sum, &[None])), "null");
        assert_eq!(json(&add_all(AggregateFunction::Avg, &[])), "null");
        let mixed = [Some(Int(1)), Some(Float(0.5))];
        assert_eq!(json(&add_all(AggregateFunction::Sum, &mixed)), "1.5");
        assert_eq!(json(&add_all(AggregateFunction::Min, &mixed)), "0.5");
        assert_eq!(
            json(&add_all(AggregateFunction::Max, &mixed)),
            "1.0",
            "a float once any is"
        );
        let big = [Some(Int(i64::MAX)), Some(Int(1))];
        assert_eq!(
            add_all(AggregateFunction::Sum, &big),
            Acc::Sum(Some(Float(i64::MAX as f64 + 1.0))),
            "past i64: a float"
        );
        // Whole numbers compare exactly, beyond f64's precision.
        let close = [Some(Int(i64::MAX)), Some(Int(i64::MAX - 1))];
        assert_eq!(
            json(&add_all(AggregateFunction::Min, &close)),
            (i64::MAX - 1).to_string()
        );
        for a in [
            add_all(AggregateFunction::Avg, &vs),
            add_all(AggregateFunction::Sum, &mixed),
            add_all(AggregateFunction::Max, &[]),
            Acc::Count(12),
        ] {
            let f = match a {
                Acc::Count(_) => AggregateFunction::Count,
                Acc::Sum(_) => AggregateFunction::Sum,
                Acc::Min(_) => AggregateFunction::Min,
                Acc::Max(_) => AggregateFunction::Max,
                Acc::Avg(..) => AggregateFunction::Avg,
            };
            let mut bytes = Vec::new();
            a.encode_into(&mut bytes);
            assert_eq!(Acc::decode(f, &bytes), Some(a));
        }
        let mut count = Vec::new();
        Acc::Count(1).encode_into(&mut count);
        assert_eq!(Acc::decode(AggregateFunction::Sum, &count), None);
    }
}
