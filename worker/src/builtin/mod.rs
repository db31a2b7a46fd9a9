//! The built-in operators ([`weir_model::builtin`]), native in the runtime:
//! running aggregates per key on the task's state backend ([`aggregate`])
//! and `select` ([`select`]).

pub(crate) mod aggregate;
mod fields;
mod select;

use weir_host::{ErrorKind, OperatorError, TaskIdent};
use weir_model::KeyBy;
use weir_model::builtin::Builtin;
use weir_model::format::Format;
use weir_state::StateBackend;

use crate::operators::StreamOperator;

/// The operator of one subtask of a built-in keyed by `key_by`, reading
/// records of type `input_type` (`None`: untyped) in `input` and writing
/// them in `output`, its keyed state in `backend`.
pub fn create(
    builtin: &Builtin,
    key_by: Option<&KeyBy>,
    input_type: Option<&weir_model::types::Type>,
    input: Format,
    output: &Format,
    ident: TaskIdent,
    backend: Box<dyn StateBackend>,
) -> Result<Box<dyn StreamOperator>, OperatorError> {
    Ok(match builtin {
        Builtin::Aggregate {
            function,
            field,
            emit,
            ttl_ms,
        } => {
            let keys = aggregate::KeyText::of(key_by, &input);
            let ty = input_type.and_then(|t| builtin.output_type(t, key_by, false));
            let results = aggregate::Results::new(*function, keys, ty.as_ref(), output, false)
                .map_err(|e| host_error(&ident, e))?;
            Box::new(aggregate::RunningAggregate::new(
                *function,
                aggregate::ValueOf::new(*function, field.clone(), input.clone()),
                *emit,
                ident,
                backend,
                results,
                *ttl_ms,
            )?)
        }
        Builtin::Select { columns, filter } => Box::new(select::Select::new(
            columns.clone(),
            filter.clone(),
            input_type,
            input,
            output,
            ident,
        )),
    })
}

/// A built-in's failure on its input (a record it cannot read).
pub(crate) fn input_error(ident: &TaskIdent, message: String) -> OperatorError {
    OperatorError {
        ident: ident.clone(),
        kind: ErrorKind::Guest,
        message,
        guest_output: Vec::new(),
    }
}

/// A failure of the runtime's own making (what the job's plan says is
/// not what the operator can do).
pub(crate) fn host_error(ident: &TaskIdent, message: String) -> OperatorError {
    OperatorError {
        ident: ident.clone(),
        kind: ErrorKind::Host,
        message,
        guest_output: Vec::new(),
    }
}

/// A failure of its state backend.
fn state_error(ident: &TaskIdent, e: anyhow::Error) -> OperatorError {
    host_error(ident, format!("state backend: {e:#}"))
}

/// A short, escaped excerpt of a (JSON) record, for an error message.
pub(crate) fn excerpt(value: &[u8]) -> String {
    weir_model::codec::Codec::Json.excerpt(value)
}

/// A JSON number read from a record: whole numbers stay whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// Parse the raw JSON text of a value: `Ok(None)` for `null`.
    fn parse(raw: &str) -> Result<Option<Number>, ()> {
        if raw == "null" {
            return Ok(None);
        }
        if let Ok(i) = raw.parse::<i64>() {
            return Ok(Some(Number::Int(i)));
        }
        // The raw text of a JSON value: a number parses as one (strings
        // keep their quotes, and JSON has no `inf` or `NaN`).
        match raw.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Some(Number::Float(f))),
            _ => Err(()),
        }
    }

    /// Write it as JSON (a float that is not finite as `null`).
    fn write(self, out: &mut Vec<u8>) {
        match self {
            Number::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes()),
            Number::Float(f) if f.is_finite() => {
                let _ = serde_json::to_writer(&mut *out, &f);
            }
            Number::Float(_) => out.extend_from_slice(b"null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Number;

    #[test]
    fn numbers_are_written_as_json_reads_them_back() {
        for (n, text) in [
            (Number::Int(0), "0"),
            (Number::Int(-5), "-5"),
            (Number::Int(i64::MIN), "-9223372036854775808"),
            (Number::Int(i64::MAX), "9223372036854775807"),
            (Number::Float(0.5), "0.5"),
            (Number::Float(-2.0), "-2.0"),
            (Number::Float(f64::NAN), "null"),
            (Number::Float(f64::INFINITY), "null"),
        ] {
            let mut out = b"x".to_vec();
            n.write(&mut out);
            assert_eq!(std::str::from_utf8(&out[1..]).unwrap(), text);
            if text != "null" {
                assert_eq!(Number::parse(text), Ok(Some(n)));
            }
        }
    }
}
