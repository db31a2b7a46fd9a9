//! Built-in window aggregates (`count`, `sum`, `min`, `max`, `avg` of a
//! JSON pointer), native in the runtime. A window's result is
//! `{"key": <key>, "window_start": <ms>, "window_end": <ms>, "<function>":
//! <value>}` (a row of that record's type on a typed stream) with the
//! timestamp `window_end - 1`.

use weir_host::{BatchContext, OperatorError, Output, TaskIdent};
use weir_model::builtin::AggregateFunction;
use weir_model::{RecordBuffer, Records};
use weir_window::{Contents, Fired};

use super::{WindowFunction, result_buffer};
use crate::builtin::aggregate::{Acc, Results, ValueOf};
use crate::builtin::{excerpt, input_error};

/// A built-in aggregate per window.
pub(crate) struct BuiltinAggregate {
    function: AggregateFunction,
    value_of: ValueOf,
    counts_null: bool,
    ident: TaskIdent,
    results: Results,
}

impl BuiltinAggregate {
    pub(crate) fn new(
        function: AggregateFunction,
        value_of: ValueOf,
        counts_null: bool,
        ident: TaskIdent,
        results: Results,
    ) -> BuiltinAggregate {
        BuiltinAggregate {
            function,
            value_of,
            counts_null,
            ident,
            results,
        }
    }

    /// The merge of stored accumulators.
    fn merged(&self, stored: &[Vec<u8>]) -> Result<Acc, OperatorError> {
        merge_stored(self.function, stored, &self.ident)
    }
}

/// The merge of stored accumulators of `function`.
pub(crate) fn merge_stored(
    function: AggregateFunction,
    stored: &[Vec<u8>],
    ident: &TaskIdent,
) -> Result<Acc, OperatorError> {
    let mut acc = Acc::new(function);
    for bytes in stored {
        let other = Acc::decode(function, bytes).ok_or_else(|| OperatorError {
            ident: ident.clone(),
            kind: weir_host::ErrorKind::Host,
            message: "state backend: a window's stored accumulator is corrupt".into(),
            guest_output: Vec::new(),
        })?;
        acc.merge(other);
    }
    Ok(acc)
}

impl WindowFunction for BuiltinAggregate {
    fn contents(&self) -> Contents {
        Contents::Accumulator
    }

    fn accumulate(
        &mut self,
        records: Records,
        groups: Vec<Vec<Vec<u8>>>,
        additions: &[(u32, u32)],
    ) -> Result<Vec<Vec<u8>>, OperatorError> {
        let mut accs = groups
            .iter()
            .map(|g| self.merged(g))
            .collect::<Result<Vec<_>, _>>()?;
        let mut scratch = Vec::new();
        for &(r, g) in additions {
            let v = self
                .value_of
                .of(records.get(r as usize).value, &mut scratch, &self.ident)?;
            accs[g as usize].add(v, self.counts_null);
        }
        Ok(groups
            .into_iter()
            .zip(&accs)
            .map(|(stored, acc)| {
                let mut buffer = result_buffer(stored);
                acc.encode_into(&mut buffer);
                buffer
            })
            .collect())
    }

    fn fire(&mut self, fired: Vec<Fired>, _: BatchContext) -> Result<Output, OperatorError> {
        let size = fired.iter().map(|f| f.key.len() + 64).sum();
        let mut main = RecordBuffer::with_capacity(fired.len(), size);
        let mut scratch = Vec::new();
        for f in fired {
            let acc = self.merged(&f.contents)?;
            main.try_push(None, Some(f.end - 1), |value| {
                self.results
                    .write(value, &f.key, Some((f.start, f.end)), &acc, &mut scratch)
            })
            .map_err(|e| input_error(&self.ident, format!("key {}: {e}", excerpt(&f.key))))?;
        }
        Ok(Output {
            main: main.finish_records(),
            side: Vec::new(),
        })
    }
}
