//! The types of records: scalars, strings, bytes, optionals, lists, nested
//! records, and `json`, the dynamic type of an untyped stream.

use std::fmt;

/// The type of a value: of a stream's records, of a record's field, of a
/// list's elements.
///
/// Written in the manifest, the contract and error messages in one text
/// syntax (its [`fmt::Display`] and [`std::str::FromStr`]):
///
/// ```
/// use weir_types::Type;
/// let t: Type = "{id: u64, name: string?, tags: list<string>, at: {lat: f64, lon: f64}}".parse().unwrap();
/// assert_eq!(t.to_string(), "{id: u64, name: string?, tags: list<string>, at: {lat: f64, lon: f64}}");
/// assert_eq!("optional<u32>".parse::<Type>().unwrap().to_string(), "u32?");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `true` or `false`.
    Bool,
    /// Signed integers of 8, 16, 32 and 64 bits.
    I8,
    /// 16-bit signed.
    I16,
    /// 32-bit signed.
    I32,
    /// 64-bit signed.
    I64,
    /// Unsigned integers of 8, 16, 32 and 64 bits.
    U8,
    /// 16-bit unsigned.
    U16,
    /// 32-bit unsigned.
    U32,
    /// 64-bit unsigned.
    U64,
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// UTF-8 text.
    String,
    /// Raw bytes (base64 in JSON).
    Bytes,
    /// Any JSON value, kept as its text: the type of an untyped stream and
    /// of a field whose shape varies.
    Json,
    /// A value or null.
    Optional(Box<Type>),
    /// Values of one type, in order.
    List(Box<Type>),
    /// Named fields, in order.
    Record(Record),
}

/// A record type: its fields, in the order they are laid out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Record {
    /// The fields.
    pub fields: Vec<Field>,
}

/// One field of a record type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: Type,
}

impl Field {
    /// A field called `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: Type) -> Field {
        Field {
            name: name.into(),
            ty,
        }
    }
}

impl Record {
    /// The field called `name`, and its position.
    pub fn field(&self, name: &str) -> Option<(usize, &Field)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }
}

impl Type {
    /// Whether it is `T?`.
    pub fn is_optional(&self) -> bool {
        matches!(self, Type::Optional(_))
    }

    /// `T?` of it (itself when it is optional already).
    pub fn optional(self) -> Type {
        match self {
            Type::Optional(_) => self,
            t => Type::Optional(Box::new(t)),
        }
    }

    /// The type a JSON pointer (`/a/b`) leads to inside it: through record
    /// fields, and through optionals and list elements by index (the result
    /// is then optional); inside a `json` value, `json`. `None` when the
    /// pointer names no field of it. An empty pointer is the type itself.
    ///
    /// ```
    /// use weir_types::Type;
    /// let t: Type = "{user: {id: u64}?, n: u32, tags: list<string>}".parse().unwrap();
    /// assert_eq!(t.at_pointer("/n"), Some(Type::U32));
    /// assert_eq!(t.at_pointer("/user/id"), Some(Type::U64.optional()));
    /// assert_eq!(t.at_pointer("/tags/0"), Some(Type::String.optional()));
    /// assert_eq!(t.at_pointer("/tags/first"), None);
    /// assert_eq!(t.at_pointer("/nope"), None);
    /// ```
    pub fn at_pointer(&self, pointer: &str) -> Option<Type> {
        let mut ty = self.clone();
        let mut optional = false;
        if pointer.is_empty() {
            return Some(ty);
        }
        for part in pointer.strip_prefix('/')?.split('/') {
            let name = part.replace("~1", "/").replace("~0", "~");
            if let Type::Optional(inner) = ty {
                optional = true;
                ty = *inner;
            }
            if ty == Type::Json {
                return Some(Type::Json);
            }
            if let Type::List(element) = ty {
                // An element, by its index: null past the end.
                part.parse::<usize>().ok()?;
                optional = true;
                ty = *element;
                continue;
            }
            let Type::Record(r) = &ty else { return None };
            let (_, f) = r.field(&name)?;
            ty = f.ty.clone();
        }
        Some(if optional { ty.optional() } else { ty })
    }
}

/// Why a reader's type cannot read what an upstream writes: the field (a
/// path such as `loc.lat`, empty for the whole value) and both sides' types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Where: fields from the outermost, dot-separated; `[]` for a list's
    /// elements.
    pub path: String,
    /// What the upstream writes there (`None`: it has no such field).
    pub upstream: Option<Type>,
    /// What the reader expects there.
    pub reader: Type,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "the record".to_owned()
        } else {
            format!("field `{}`", self.path)
        };
        match &self.upstream {
            None => write!(
                f,
                "{at} ({}) is not written upstream (make it optional to read it as null)",
                self.reader
            ),
            Some(u) if u.is_optional() && !self.reader.is_optional() => write!(
                f,
                "{at} is {u} upstream, which may be null, and {} here",
                self.reader
            ),
            Some(u) => write!(f, "{at} is {u} upstream and {} here", self.reader),
        }
    }
}

/// Whether a reader of type `reader` can read values written as
/// `upstream`: equal types, fields matched by name (extra upstream fields
/// are ignored; a reader's field missing upstream must be optional), an
/// optional read from a value that is never null, lossless widening of
/// numbers (`u32` read as `u64`, `i32` as `i64`, `f32` as `f64`), and
/// anything read as `json`.
///
/// ```
/// use weir_types::{Type, check_reads};
/// let up: Type = "{id: u64, k: u32, name: string}".parse().unwrap();
/// assert!(check_reads(&up, &"{k: u64, id: u64}".parse().unwrap()).is_ok());
/// let e = check_reads(&up, &"{k: string}".parse().unwrap()).unwrap_err();
/// assert_eq!(e.to_string(), "field `k` is u32 upstream and string here");
/// ```
pub fn check_reads(upstream: &Type, reader: &Type) -> Result<(), Mismatch> {
    check_at(upstream, reader, &mut String::new())
}

fn check_at(upstream: &Type, reader: &Type, path: &mut String) -> Result<(), Mismatch> {
    let mismatch = |path: &str| Mismatch {
        path: path.to_owned(),
        upstream: Some(upstream.clone()),
        reader: reader.clone(),
    };
    // `json` is any value: what reads it, or what it feeds, is checked
    // record by record when the job runs.
    if upstream == reader || *reader == Type::Json || *upstream == Type::Json {
        return Ok(());
    }
    match (upstream, reader) {
        (Type::Optional(u), Type::Optional(r)) => check_at(u, r, path),
        (u, Type::Optional(r)) => check_at(u, r, path),
        (Type::Optional(_), _) => Err(mismatch(path)),
        (Type::List(u), Type::List(r)) => {
            let len = path.len();
            path.push_str("[]");
            check_at(u, r, path)?;
            path.truncate(len);
            Ok(())
        }
        (Type::Record(u), Type::Record(r)) => {
            for field in &r.fields {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&field.name);
                match u.field(&field.name) {
                    Some((_, uf)) => check_at(&uf.ty, &field.ty, path)?,
                    None if field.ty.is_optional() => {}
                    None => {
                        return Err(Mismatch {
                            path: path.clone(),
                            upstream: None,
                            reader: field.ty.clone(),
                        });
                    }
                }
                path.truncate(len);
            }
            Ok(())
        }
        (u, r) if widens(u, r) => Ok(()),
        _ => Err(mismatch(path)),
    }
}

/// Whether every value of `from` is a value of `to`.
fn widens(from: &Type, to: &Type) -> bool {
    use Type::*;
    let rank_u = |t: &Type| match t {
        U8 => Some(1),
        U16 => Some(2),
        U32 => Some(3),
        U64 => Some(4),
        _ => None,
    };
    let rank_i = |t: &Type| match t {
        I8 => Some(1),
        I16 => Some(2),
        I32 => Some(3),
        I64 => Some(4),
        _ => None,
    };
    match (from, to) {
        (F32, F64) => true,
        (a, b) if rank_u(a).is_some() && rank_u(b).is_some() => rank_u(a) <= rank_u(b),
        (a, b) if rank_i(a).is_some() && rank_i(b).is_some() => rank_i(a) <= rank_i(b),
        // An unsigned integer fits a wider signed one.
        (a, b) if rank_u(a).is_some() && rank_i(b).is_some() => rank_u(a) < rank_i(b),
        _ => false,
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("bool"),
            Type::I8 => f.write_str("i8"),
            Type::I16 => f.write_str("i16"),
            Type::I32 => f.write_str("i32"),
            Type::I64 => f.write_str("i64"),
            Type::U8 => f.write_str("u8"),
            Type::U16 => f.write_str("u16"),
            Type::U32 => f.write_str("u32"),
            Type::U64 => f.write_str("u64"),
            Type::F32 => f.write_str("f32"),
            Type::F64 => f.write_str("f64"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Json => f.write_str("json"),
            Type::Optional(t) => write!(f, "{t}?"),
            Type::List(t) => write!(f, "list<{t}>"),
            Type::Record(r) => r.fmt(f),
        }
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if is_identifier(&field.name) {
                f.write_str(&field.name)?;
            } else {
                write!(f, "{}", serde_json::Value::String(field.name.clone()))?;
            }
            write!(f, ": {}", field.ty)?;
        }
        f.write_str("}")
    }
}

/// Whether `name` can be written without quotes: a letter or `_`, then
/// letters, digits and `_`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl serde::Serialize for Type {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Type {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Type, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Type {
        s.parse().unwrap()
    }

    #[test]
    fn reads_by_name_with_optionals_and_widening() {
        let up = t("{id: u64, k: u32, name: string?, tags: list<u16>, at: {lat: f32}}");
        for ok in [
            "{id: u64}",
            "{k: u32, id: u64}",
            "{k: i64}",
            "{name: string?}",
            "{missing: bool?}",
            "{tags: list<u64>}",
            "{at: {lat: f64}}",
            "{at: json}",
            "json",
            "{id: u64?}",
        ] {
            assert_eq!(
                check_reads(&Type::Json, &t(ok)),
                Ok(()),
                "json feeds anything"
            );
            assert_eq!(check_reads(&up, &t(ok)), Ok(()), "{ok}");
        }
        let err = |reader: &str| check_reads(&up, &t(reader)).unwrap_err().to_string();
        assert_eq!(
            err("{name: string}"),
            "field `name` is string? upstream, which may be null, and string here"
        );
        assert_eq!(
            err("{missing: bool}"),
            "field `missing` (bool) is not written upstream (make it optional to read it as null)"
        );
        assert_eq!(
            err("{tags: list<u8>}"),
            "field `tags[]` is u16 upstream and u8 here"
        );
        assert_eq!(
            err("{at: {lat: i64}}"),
            "field `at.lat` is f32 upstream and i64 here"
        );
        assert_eq!(err("{k: i32}"), "field `k` is u32 upstream and i32 here");
        assert_eq!(
            err("u64"),
            format!("the record is {up} upstream and u64 here")
        );
    }

    #[test]
    fn serializes_as_its_text() {
        let ty = t("{a: list<{b: bytes?}>}");
        let json = serde_json::to_string(&ty).unwrap();
        assert_eq!(json, r#""{a: list<{b: bytes?}>}""#);
        assert_eq!(serde_json::from_str::<Type>(&json).unwrap(), ty);
        assert!(serde_json::from_str::<Type>(r#""{a: nope}""#).is_err());
    }
}
