//! The types of keyed state: a state declared with a row type keeps its
//! values as rows of it (docs/types.md, "State and schema evolution"). When
//! an operator declares a restored state with another type than the one its
//! values were written in — a new version of the operator, started from a
//! savepoint — they are converted as it is declared, by field name, as a
//! reader of a stream reads its writer's records; a type that cannot read
//! the stored one is refused before anything is converted.

use weir_model::codec::Codec;
use weir_model::format::Format;
use weir_state::StateBackend;

/// Make state `id` (called `name`) hold rows of `ty` (`None`: values in
/// `codec`, the job's), converting what it holds in another type. `Ok(Err)`:
/// the declaration is refused (the operator is told why, and so is whoever
/// asks the backend's refusals); `Err`: a stored value could not be
/// converted, and the task fails.
pub(crate) fn declare_type(
    backend: &mut dyn StateBackend,
    codec: Codec,
    name: &str,
    id: u32,
    ty: Option<&str>,
) -> wasmtime::Result<Result<(), String>> {
    let stored = backend.value_type(id).map(str::to_owned);
    if stored.as_deref() == ty {
        return Ok(Ok(()));
    }
    let to = match Format::of_state(codec, ty) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("state `{name}`: {e}"))),
    };
    let from = Format::of_state(codec, stored.as_deref())
        .map_err(|e| wasmtime::format_err!("state `{name}` as stored: {e}"))?;
    if let (Some(old), Some(new)) = (&from.schema, &to.schema)
        && let Err(mismatch) = weir_model::types::check_reads(&old.ty, &new.ty)
    {
        return Ok(Err(backend.refuse(format!(
            "state `{name}` holds rows of {}, which {} cannot read: {mismatch}",
            old.ty, new.ty
        ))));
    }
    if from.same_as(&to) {
        // The same type written another way: nothing to convert.
        backend.retype(id, ty, None).map_err(state_error)?;
        return Ok(Ok(()));
    }
    let mut convert = |value: &[u8]| from.convert(&to, value);
    let converted = backend.retype(id, ty, Some(&mut convert));
    if let Err(e) = converted {
        let to = ty.unwrap_or("the state codec's values");
        let why = backend.refuse(format!(
            "state `{name}` cannot be read as {to}: a stored value does not fit: {e:#}"
        ));
        return Err(wasmtime::Error::msg(why));
    }
    Ok(Ok(()))
}

fn state_error(e: anyhow::Error) -> wasmtime::Error {
    wasmtime::format_err!("state backend: {e:#}")
}
