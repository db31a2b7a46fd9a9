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
    types: Vec<(u32, Option<String>)>,
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
/// is queued in `declared` for [`convert`]. `Err`: the declaration is
/// refused (a row type that cannot read the stored rows, the same state
/// declared twice with two types).
pub(crate) fn declare_type(
    backend: &mut dyn StateBackend,
    codec: Codec,
    (name, id, existed): (&str, u32, bool),
    (ty, to): (Option<&str>, Format),
    declared: &mut Declarations,
) -> Result<(), String> {
    if let Some((_, before)) = declared.types.iter().find(|(i, _)| *i == id) {
        return if before.as_deref() == ty {
            Ok(())
        } else {
            Err(format!(
                "state `{name}` is declared twice, as {} and as {}",
                before.as_deref().unwrap_or("untyped values"),
                ty.unwrap_or("untyped values")
            ))
        };
    }
    declared.types.push((id, ty.map(str::to_owned)));
    let stored = backend.value_type(id).map(str::to_owned);
    if !existed || stored.as_deref() == ty {
        // Nothing stored in another type.
        return backend.retype(id, ty, None).map_err(|e| format!("{e:#}"));
    }
    let from = Format::of_state(codec, stored.as_deref())
        .map_err(|e| format!("state `{name}` as stored: {e}"))?;
    if let (Some(old), Some(new)) = (&from.schema, &to.schema)
        && let Err(mismatch) = weir_model::types::check_reads(&old.ty, &new.ty)
    {
        return Err(format!(
            "state `{name}` holds rows of {}, which {} cannot read: {mismatch}",
            old.ty, new.ty
        ));
    }
    if from.same_as(&to) {
        // The same type written another way: nothing to convert.
        return backend.retype(id, ty, None).map_err(|e| format!("{e:#}"));
    }
    declared.pending.push(Retype {
        name: name.to_owned(),
        id,
        ty: ty.map(str::to_owned),
        from,
        to,
    });
    Ok(())
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
