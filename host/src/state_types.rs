//! The types of keyed state: a state declared with a row type keeps its
//! values as rows of it (docs/types.md, "State and schema evolution"). When
//! an operator declares a restored state with another type than the one its
//! values were written in — a new version of the operator, started from a
//! savepoint — they are converted by field name, as a reader of a stream
//! reads its writer's records; a row type that cannot read the stored one
//! is refused as it is declared, before anything is converted.
//!
//! The conversion itself waits until the operator's `create` returned
//! ([`convert`]): it reads and writes the whole state, which may take
//! longer than a guest call may last.

use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_state::StateBackend;

/// The longest type text a state may be declared with (a type is a few
/// hundred bytes; its checks are not meant for megabytes).
const MAX_TYPE_TEXT: usize = 64 << 10;

/// What an operator's `create` declared: each state's type, and the
/// states to convert once it returned.
#[derive(Default)]
pub(crate) struct Declarations {
    /// Per state declared: its type, or why it was refused.
    types: Vec<(u32, Result<Option<String>, String>)>,
    pending: Vec<Retype>,
}

/// A state whose stored values must be converted to the type its operator
/// declared.
struct Retype {
    name: String,
    id: u32,
    ty: Option<String>,
    from: Format,
    to: Format,
}

/// The format of state `name` declared as rows of `ty` (`None`: values in
/// `codec`, the job's), or why it is refused.
pub(crate) fn format_of(codec: Codec, name: &str, ty: Option<&str>) -> Result<Format, String> {
    if let Some(text) = ty
        && text.len() > MAX_TYPE_TEXT
    {
        return Err(format!(
            "state `{name}`: its type is {} bytes long, more than the {MAX_TYPE_TEXT} a state's type may be",
            text.len()
        ));
    }
    Format::of_state(codec, ty).map_err(|e| format!("state `{name}`: {e}"))
}

/// Make state `id` (called `name`, `existed` before this declaration) hold
/// rows of `ty` — of format `to` — or values in `codec`: a new state, or one
/// stored in that type already, is so at once; one stored in another type
/// is queued in `declared` for [`convert`]. `Ok(Err)`: the declaration is
/// refused (a row type that cannot read the stored rows, the same state
/// declared twice with two types), and refused again if it is repeated;
/// `Err`: the backend failed (the task fails).
pub(crate) fn declare_type(
    backend: &mut dyn StateBackend,
    codec: Codec,
    (name, id, existed): (&str, u32, bool),
    (ty, to): (Option<&str>, Format),
    declared: &mut Declarations,
) -> Result<Result<(), String>, String> {
    if let Some((_, before)) = declared.types.iter().find(|(i, _)| *i == id) {
        return Ok(match before {
            Ok(before) if before.as_deref() == ty => Ok(()),
            Ok(before) => Err(format!(
                "state `{name}` is declared twice, as {} and as {}",
                before.as_deref().unwrap_or("untyped values"),
                ty.unwrap_or("untyped values")
            )),
            Err(refused) => Err(refused.clone()),
        });
    }
    let outcome = take_type(backend, codec, (name, id, existed), (ty, to), declared)?;
    declared.types.push((
        id,
        match &outcome {
            Ok(()) => Ok(ty.map(str::to_owned)),
            Err(refused) => Err(refused.clone()),
        },
    ));
    Ok(outcome)
}

fn take_type(
    backend: &mut dyn StateBackend,
    codec: Codec,
    (name, id, existed): (&str, u32, bool),
    (ty, to): (Option<&str>, Format),
    declared: &mut Declarations,
) -> Result<Result<(), String>, String> {
    // Labelled as `ty` (a write only where the label changes: RocksDB's
    // registry is not rewritten at every start).
    let label = |backend: &mut dyn StateBackend| {
        if backend.value_type(id) == ty {
            return Ok(Ok(()));
        }
        backend
            .retype(id, ty, None)
            .map(Ok)
            .map_err(|e| format!("state `{name}`: {e:#}"))
    };
    let stored = backend.value_type(id).map(str::to_owned);
    if !existed || stored.as_deref() == ty {
        // Nothing stored in another type.
        return label(backend);
    }
    let from = Format::of_state(codec, stored.as_deref())
        .map_err(|e| format!("state `{name}` as stored: {e}"))?;
    if let (Some(old), Some(new)) = (&from.schema, &to.schema)
        && let Err(mismatch) = weir_model::types::check_reads(&old.ty, &new.ty)
    {
        return Ok(Err(format!(
            "state `{name}` holds rows of {}, which {} cannot read: {mismatch}",
            old.ty, new.ty
        )));
    }
    if from.same_as(&to) {
        // The same type written another way: nothing to convert.
        return label(backend);
    }
    declared.pending.push(Retype {
        name: name.to_owned(),
        id,
        ty: ty.map(str::to_owned),
        from,
        to,
    });
    Ok(Ok(()))
}

/// Convert the stored values of the states `declared` queued to their new
/// types (each state a pass over the backend). `Err`: a stored value does
/// not fit its new type (untyped values carry no type to check before):
/// the instance fails, its state partly converted (a task's state comes
/// again from a checkpoint).
pub(crate) fn convert(
    backend: &mut dyn StateBackend,
    declared: Declarations,
) -> Result<(), String> {
    for r in declared.pending {
        let mut convert = |value: &[u8]| r.from.convert(&r.to, value);
        if let Err(e) = backend.retype(r.id, r.ty.as_deref(), Some(&mut convert)) {
            let to = r.ty.as_deref().unwrap_or("the state codec's values");
            return Err(backend.refuse(format!(
                "state `{}` cannot be read as {to}: a stored value does not fit: {e:#}",
                r.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weir_state::{MemoryStateBackend, StateKey, StateKind, StateOp};

    use super::*;

    fn declare(
        b: &mut MemoryStateBackend,
        existed: bool,
        ty: Option<&str>,
        declared: &mut Declarations,
    ) -> Result<Result<(), String>, String> {
        let to = format_of(Codec::Msgpack, "s", ty).unwrap();
        declare_type(b, Codec::Msgpack, ("s", 0, existed), (ty, to), declared)
    }

    fn stored(ty: Option<&str>, value: &[u8]) -> MemoryStateBackend {
        let mut b = MemoryStateBackend::new();
        let id = b.register("s", StateKind::Value).unwrap();
        b.retype(id, ty, None).unwrap();
        b.apply(StateOp::PutValue {
            target: StateKey {
                state: id,
                key: b"k".to_vec(),
            },
            value: value.to_vec(),
        })
        .unwrap();
        b
    }

    #[test]
    fn a_new_state_is_labelled_and_a_stored_one_queued_for_conversion() {
        // New in this version: labelled, nothing to convert.
        let mut b = MemoryStateBackend::new();
        b.register("s", StateKind::Value).unwrap();
        let mut d = Declarations::default();
        assert_eq!(declare(&mut b, false, Some("{n: u64}"), &mut d), Ok(Ok(())));
        assert_eq!(b.value_type(0), Some("{n: u64}"));
        assert!(d.pending.is_empty());
        // Stored untyped: queued, labelled only once converted.
        let mut b = stored(None, &[0x81, 0xa1, b'n', 0x07]);
        let mut d = Declarations::default();
        assert_eq!(declare(&mut b, true, Some("{n: u64}"), &mut d), Ok(Ok(())));
        assert_eq!((b.value_type(0), d.pending.len()), (None, 1));
        convert(&mut b, d).unwrap();
        assert_eq!(b.value_type(0), Some("{n: u64}"));
        // A row of {n: u64}: its null bitmap, then `n`.
        let row = [&[0u8][..], &7u64.to_le_bytes()].concat();
        assert_eq!(b.get_value(0, b"k").unwrap(), Some(row));
    }

    #[test]
    fn rows_that_cannot_be_read_are_refused_and_again_when_declared_again() {
        let mut b = stored(
            Some("{n: u64}"),
            &[&[0u8][..], &7u64.to_le_bytes()].concat(),
        );
        let mut d = Declarations::default();
        for _ in 0..2 {
            let refused = declare(&mut b, true, Some("{n: u32}"), &mut d).unwrap();
            assert!(refused.unwrap_err().contains("field `n` is u64"));
        }
        assert!(d.pending.is_empty());
        assert_eq!(b.value_type(0), Some("{n: u64}"));
    }

    #[test]
    fn a_state_declared_twice_with_two_types_is_refused() {
        let mut b = MemoryStateBackend::new();
        b.register("s", StateKind::Value).unwrap();
        let mut d = Declarations::default();
        assert_eq!(declare(&mut b, false, Some("u64"), &mut d), Ok(Ok(())));
        assert_eq!(declare(&mut b, true, Some("u64"), &mut d), Ok(Ok(())));
        let twice = declare(&mut b, true, None, &mut d).unwrap().unwrap_err();
        assert!(twice.contains("declared twice"), "{twice}");
        assert_eq!(b.value_type(0), Some("u64"));
    }

    #[test]
    fn a_stored_value_that_does_not_fit_fails_the_conversion_naming_the_state() {
        // {"m": 1}: no `n`, which the type requires.
        let mut b = stored(None, &[0x81, 0xa1, b'm', 0x01]);
        let mut d = Declarations::default();
        assert_eq!(declare(&mut b, true, Some("{n: u64}"), &mut d), Ok(Ok(())));
        let e = convert(&mut b, d).unwrap_err();
        assert!(e.contains("state `s`") && e.contains('n'), "{e}");
        assert_eq!(b.value_type(0), None);
    }

    #[test]
    fn a_type_past_its_limit_is_refused() {
        let long = format!(
            "{{{}}}",
            (0..9000)
                .map(|i| format!("f{i}: u8"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(long.len() > MAX_TYPE_TEXT);
        let e = format_of(Codec::Msgpack, "s", Some(&long)).unwrap_err();
        assert!(e.contains("bytes long"), "{e}");
    }
}
