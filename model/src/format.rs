//! A stream's records as the host reads them: their [`Codec`] and, for a
//! stream of rows, their type compiled ([`Schema`]). What the runtime reads
//! of a record — a `key-by` field, a source's timestamp, the JSON line a
//! sink writes, an excerpt for an error — it reads through this.

use std::borrow::Cow;
use std::sync::Arc;

use weir_types::row::{self, FieldNode, Node, Schema};

use crate::codec::Codec;
use crate::manifest::KeyBy;

/// How one stream's records are encoded.
#[derive(Clone, Debug, Default)]
pub struct Format {
    /// Their codec.
    pub codec: Codec,
    /// Their type, for a stream of rows.
    pub schema: Option<Arc<Schema>>,
}

impl Format {
    /// Records in JSON or MessagePack.
    pub fn of(codec: Codec) -> Format {
        Format {
            codec,
            schema: None,
        }
    }

    /// The schema of a stream of rows (an error for any other: a planning
    /// bug).
    fn schema(&self) -> Result<&Schema, String> {
        self.schema
            .as_deref()
            .ok_or_else(|| "a stream of rows without its type".to_owned())
    }

    /// A short excerpt of a record, for an error message (a row shown as
    /// JSON).
    pub fn excerpt(&self, value: &[u8]) -> String {
        match (self.codec, &self.schema) {
            (Codec::Row, Some(schema)) => {
                let mut json = Vec::new();
                match row::json::write_value(&schema.node, value, &mut json) {
                    Ok(()) => Codec::Json.excerpt(&json),
                    Err(e) => format!("(a malformed row of {} bytes: {e})", value.len()),
                }
            }
            (codec, _) => codec.excerpt(value),
        }
    }

    /// The key bytes a `key-by` JSON pointer reads from `value`: the
    /// field's value in the stream's codec — MessagePack for a row stream,
    /// whose keys are MessagePack — or `None` when it has no such field.
    pub fn pointer_key<'a>(
        &self,
        value: &'a [u8],
        pointer: &str,
    ) -> Result<Option<Cow<'a, [u8]>>, String> {
        match self.codec {
            Codec::Json => crate::json::pointer_compact(value, pointer)
                .map_err(|e| format!("is not JSON ({e})")),
            Codec::Msgpack => crate::msgpack::pointer(value, pointer)
                .map_err(|e| format!("is not MessagePack ({e})")),
            Codec::Row => {
                let schema = self.schema()?;
                let Some(path) = schema.pointer(pointer) else {
                    // Inside a `json` field (or nowhere): find it in the
                    // record's JSON.
                    return self.pointer_key_in_json(value, pointer);
                };
                let found = row::locate(&path, value).map_err(|e| format!("is malformed ({e})"))?;
                let Some(at) = found else {
                    return Ok(None);
                };
                let mut key = Vec::new();
                row::msgpack::write_slot(
                    &at.field.node,
                    at.base,
                    0,
                    at.index,
                    at.field.offset,
                    &mut key,
                )
                .map_err(|e| format!("is malformed ({e})"))?;
                Ok(Some(Cow::Owned(key)))
            }
        }
    }

    /// The key at `pointer` of a row whose path to it goes through a
    /// `json` field: read from the record's JSON, as MessagePack.
    fn pointer_key_in_json<'a>(
        &self,
        value: &[u8],
        pointer: &str,
    ) -> Result<Option<Cow<'a, [u8]>>, String> {
        let mut json = Vec::new();
        self.write_json(value, &mut json)?;
        let Some(field) = crate::json::pointer_compact(&json, pointer)
            .map_err(|e| format!("is not JSON ({e})"))?
        else {
            return Ok(None);
        };
        let mut key = Vec::new();
        crate::msgpack::from_json(&field, &mut key).map_err(|e| e.to_string())?;
        Ok(Some(Cow::Owned(key)))
    }

    /// For a stream of rows keyed by `key_by` (a field, or the whole value):
    /// its key reader, compiled once for every record of the stream. `None`
    /// for other streams, and for a field inside a `json` value (read
    /// record by record: [`Format::pointer_key`]).
    pub fn row_keys(&self, key_by: &KeyBy) -> Option<RowKeys> {
        let schema = self
            .schema
            .as_deref()
            .filter(|_| self.codec == Codec::Row)?;
        match key_by {
            KeyBy::Value => Some(RowKeys::Value(schema.node.clone())),
            KeyBy::Pointer(p) => {
                let path = schema.pointer(p)?;
                Some(match &path[..] {
                    // A top-level field of a fixed-width type, never null.
                    &[
                        (
                            _,
                            &FieldNode {
                                node: Node::Scalar(scalar),
                                offset,
                                ..
                            },
                        ),
                    ] => RowKeys::Slot { offset, scalar },
                    _ => RowKeys::Field(path.into_iter().map(|(i, f)| (i, f.clone())).collect()),
                })
            }
            KeyBy::Key => None,
        }
    }

    /// The whole value as a key (`key-by = "value"`): itself, or for a row
    /// its MessagePack.
    pub fn value_key<'a>(&self, value: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
        match self.codec {
            Codec::Row => {
                let mut key = Vec::new();
                row::msgpack::write_value(&self.schema()?.node, value, &mut key)
                    .map_err(|e| format!("a malformed row ({e})"))?;
                Ok(Cow::Owned(key))
            }
            _ => Ok(Cow::Borrowed(value)),
        }
    }

    /// The path of the field at `pointer` in a row stream's type, resolved
    /// once for every record; `None` for a stream that is not rows, and for
    /// a field inside a `json` value or past the type.
    pub fn row_path(&self, pointer: &str) -> Option<Vec<(usize, FieldNode)>> {
        let schema = self
            .schema
            .as_deref()
            .filter(|_| self.codec == Codec::Row)?;
        let path = schema.pointer(pointer)?;
        Some(path.into_iter().map(|(i, f)| (i, f.clone())).collect())
    }

    /// The integer at `pointer` in a row (a typed source's timestamp): an
    /// error naming the field when it is missing, null or not an integer.
    /// `path` is the pointer's [`Format::row_path`] when the caller
    /// resolved it once (else it is resolved here).
    pub fn row_int(
        &self,
        value: &[u8],
        pointer: &str,
        path: Option<&[(usize, FieldNode)]>,
    ) -> Result<i64, String> {
        self.schema()?;
        let not_integer = || {
            format!(
                "the field {pointer} of record {} is not an integer of 64 bits",
                self.excerpt(value)
            )
        };
        let resolved;
        let path = match path {
            Some(path) => path,
            None => match self.row_path(pointer) {
                Some(p) => {
                    resolved = p;
                    &resolved[..]
                }
                None => &[],
            },
        };
        if path.is_empty() {
            // Inside a `json` field: read from the record's JSON.
            let mut json = Vec::new();
            self.write_json(value, &mut json)?;
            let raw = crate::json::pointer_raw(&json, pointer)
                .map_err(|e| format!("a record is not JSON: {e}"))?
                .ok_or_else(|| format!("record {} has no field {pointer}", self.excerpt(value)))?;
            return raw.get().parse::<i64>().map_err(|_| not_integer());
        }
        let found = row::locate(path, value).map_err(|e| format!("a malformed row: {e}"))?;
        let Some(at) = found else {
            return Err(format!(
                "record {} has no field {pointer}",
                self.excerpt(value)
            ));
        };
        row::read_int(at)
            .map_err(|e| format!("a malformed row: {e}"))?
            .ok_or_else(not_integer)
    }

    /// Append `value` as one line of JSON (a sink's output line, without
    /// its newline).
    pub fn write_json(&self, value: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        match self.codec {
            Codec::Json => {
                out.extend_from_slice(value);
                Ok(())
            }
            Codec::Msgpack => crate::msgpack::to_json(value, out).map_err(|e| e.to_string()),
            Codec::Row => row::json::write_value(&self.schema()?.node, value, out)
                .map_err(|e| format!("a malformed row: {e}")),
        }
    }

    /// The format of keyed state declared as rows of `ty` (its text) or,
    /// `None`, in the job's codec `codec`.
    pub fn of_state(codec: Codec, ty: Option<&str>) -> Result<Format, String> {
        match ty {
            None => Ok(Format::of(codec)),
            Some(text) => {
                let ty: weir_types::Type = text
                    .parse()
                    .map_err(|e| format!("the type `{text}` does not parse: {e}"))?;
                Ok(Format {
                    codec: Codec::Row,
                    schema: Some(Arc::new(Schema::new(ty))),
                })
            }
        }
    }

    /// Whether values in it read the same in `other`.
    pub fn same_as(&self, other: &Format) -> bool {
        match (&self.schema, &other.schema) {
            (Some(a), Some(b)) => a.ty == b.ty,
            (None, None) => self.codec == other.codec,
            _ => false,
        }
    }

    /// `value` in this format, as `to` writes it: a row read into another
    /// type by field name (what it lacks optional, null; what it has more,
    /// dropped; numbers as wide as the new type), JSON or MessagePack read
    /// into a row the same way. The error names the field.
    pub fn convert(&self, to: &Format, value: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(value.len());
        if self.same_as(to) {
            out.extend_from_slice(value);
            return Ok(out);
        }
        // Through MessagePack, which says anything either side can.
        let mut between = Vec::new();
        let msgpack: &[u8] = match self.codec {
            Codec::Msgpack => value,
            Codec::Json => {
                crate::msgpack::from_json(value, &mut between).map_err(|e| e.to_string())?;
                &between
            }
            Codec::Row => {
                row::msgpack::write_value(&self.schema()?.node, value, &mut between)
                    .map_err(|e| format!("a malformed row: {e}"))?;
                &between
            }
        };
        match to.codec {
            Codec::Msgpack => out.extend_from_slice(msgpack),
            Codec::Json => crate::msgpack::to_json(msgpack, &mut out).map_err(|e| e.to_string())?,
            Codec::Row => row::json::read_with(
                &to.schema()?.node,
                &mut rmp_serde::Deserializer::from_read_ref(msgpack),
                &mut out,
            )?,
        }
        Ok(out)
    }
}

/// Reads the keys of rows: a field at a path compiled once, or the whole
/// value; keys are MessagePack.
#[derive(Clone, Debug)]
pub enum RowKeys {
    /// A top-level field of a fixed-width type that is never null: read at
    /// its offset.
    Slot {
        /// Its slot's offset.
        offset: usize,
        /// Its type.
        scalar: weir_types::row::Scalar,
    },
    /// The field at this path of slots.
    Field(Vec<(usize, FieldNode)>),
    /// The whole value, of this type.
    Value(Node),
}

impl RowKeys {
    /// Append the key of `value` to `out`: `false` when it has no such field
    /// (a record on the way is null).
    pub fn write(&self, value: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        let malformed = |e: row::RowError| format!("is malformed ({e})");
        match self {
            RowKeys::Slot { offset, scalar } => {
                row::msgpack::write_scalar(*scalar, value, *offset, out).map_err(malformed)?;
                Ok(true)
            }
            RowKeys::Value(node) => {
                row::msgpack::write_value(node, value, out).map_err(malformed)?;
                Ok(true)
            }
            RowKeys::Field(path) => {
                let Some(at) = row::locate(path, value).map_err(malformed)? else {
                    return Ok(false);
                };
                row::msgpack::write_slot(
                    &at.field.node,
                    at.base,
                    0,
                    at.index,
                    at.field.offset,
                    out,
                )
                .map_err(malformed)?;
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_types::Type;

    fn rows(ty: &str) -> Format {
        Format {
            codec: Codec::Row,
            schema: Some(Arc::new(Schema::new(ty.parse::<Type>().unwrap()))),
        }
    }

    fn row(f: &Format, json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        row::json::read_value(&f.schema.as_ref().unwrap().node, json.as_bytes(), &mut out).unwrap();
        out
    }

    #[test]
    fn keys_of_rows_are_msgpack_of_the_field() {
        let f = rows("{k: u32, name: string, at: {city: string}?}");
        let r = row(&f, r#"{"k": 300, "name": "ab", "at": {"city": "x"}}"#);
        assert_eq!(
            f.pointer_key(&r, "/k").unwrap().unwrap(),
            &[0xcd, 0x01, 0x2c][..]
        );
        assert_eq!(
            f.pointer_key(&r, "/name").unwrap().unwrap(),
            &[0xa2, b'a', b'b'][..]
        );
        assert_eq!(
            f.pointer_key(&r, "/at/city").unwrap().unwrap(),
            &[0xa1, b'x'][..]
        );
        assert_eq!(f.pointer_key(&r, "/nope").unwrap(), None);
        // Into a json field: the value there, as MessagePack.
        let j = rows("{p: json, t: u8}");
        let r = row(&j, r#"{"p": {"user": "ab", "ts": 12}, "t": 1}"#);
        assert_eq!(
            j.pointer_key(&r, "/p/user").unwrap().unwrap(),
            &[0xa2, b'a', b'b'][..]
        );
        assert_eq!(j.pointer_key(&r, "/p/nope").unwrap(), None);
        assert_eq!(j.row_int(&r, "/p/ts", None), Ok(12));
        let r = row(&f, r#"{"k": 1, "name": "", "at": null}"#);
        assert_eq!(
            f.pointer_key(&r, "/at/city").unwrap(),
            None,
            "a null record on the way"
        );
        // The same key as the same field of a MessagePack stream.
        let packed = [0x81, 0xa1, b'k', 0xcd, 0x01, 0x2c];
        let m = Format::of(Codec::Msgpack);
        assert_eq!(
            m.pointer_key(&packed, "/k").unwrap().unwrap(),
            &[0xcd, 0x01, 0x2c][..]
        );
        let words = rows("string");
        assert_eq!(&*words.value_key(b"hi").unwrap(), &[0xa2, b'h', b'i'][..]);
    }

    /// A top-level fixed-width field is read at its offset: the same key
    /// as through its path, for every scalar type.
    #[test]
    fn a_scalar_field_s_key_is_read_at_its_offset() {
        let f = rows("{s: string, a: i8, b: u16, c: i64, d: u64, e: f32, g: f64, h: bool, o: u8?}");
        let r = row(
            &f,
            r#"{"s": "x", "a": -100, "b": 300, "c": -70000, "d": 18446744073709551615,
                "e": 0.5, "g": -2.25, "h": true, "o": 7}"#,
        );
        let schema = f.schema.as_ref().unwrap();
        for p in ["/a", "/b", "/c", "/d", "/e", "/g", "/h", "/o", "/s"] {
            let keys = f.row_keys(&KeyBy::Pointer(p.into())).unwrap();
            let slot = matches!(keys, RowKeys::Slot { .. });
            assert_eq!(slot, !["/o", "/s"].contains(&p), "{p}");
            let path = schema.pointer(p).unwrap();
            let by_path = RowKeys::Field(path.into_iter().map(|(i, f)| (i, f.clone())).collect());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert!(keys.write(&r, &mut a).unwrap());
            assert!(by_path.write(&r, &mut b).unwrap());
            assert_eq!(a, b, "{p}");
            assert_eq!(
                Some(&a[..]),
                f.pointer_key(&r, p).unwrap().as_deref(),
                "{p}"
            );
        }
        // A row too short for the slot is an error, not a read past it.
        let keys = f.row_keys(&KeyBy::Pointer("/g".into())).unwrap();
        assert!(keys.write(&r[..10], &mut Vec::new()).is_err());
    }

    #[test]
    fn timestamps_and_json_lines_of_rows() {
        let f = rows("{ts: i64, u: u64, s: string, o: i32?}");
        let r = row(&f, r#"{"ts": -5, "u": 7, "s": "x", "o": null}"#);
        assert_eq!(f.row_int(&r, "/ts", None), Ok(-5));
        assert_eq!(f.row_int(&r, "/u", None), Ok(7));
        // A path resolved once reads the same as one resolved per record;
        // a pointer into a `json` field or past the type has none.
        let ts = f.row_path("/ts").unwrap();
        assert_eq!(f.row_int(&r, "/ts", Some(&ts)), Ok(-5));
        let o = f.row_path("/o").unwrap();
        assert!(f.row_int(&r, "/o", Some(&o)).is_err());
        assert!(f.row_path("/x").is_none());
        assert!(rows("{p: json}").row_path("/p/ts").is_none());
        assert!(Format::of(Codec::Json).row_path("/ts").is_none());
        assert!(
            f.row_int(&r, "/s", None)
                .unwrap_err()
                .contains("not an integer")
        );
        assert!(
            f.row_int(&r, "/o", None)
                .unwrap_err()
                .contains("not an integer")
        );
        assert!(
            f.row_int(&r, "/x", None)
                .unwrap_err()
                .contains("no field /x")
        );
        let mut line = Vec::new();
        f.write_json(&r, &mut line).unwrap();
        assert_eq!(line, br#"{"ts":-5,"u":7,"s":"x","o":null}"#);
        assert!(f.excerpt(&r).contains(r#"\"ts\":-5"#));
        assert!(f.write_json(&r[..3], &mut line).is_err());
    }

    fn msgpack_of(json: &str) -> Vec<u8> {
        let mut out = Vec::new();
        crate::msgpack::from_json(json.as_bytes(), &mut out).unwrap();
        out
    }

    /// A value in `f`, as JSON text.
    fn json(f: &Format, value: &[u8]) -> String {
        let mut out = Vec::new();
        f.write_json(value, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn state_values_convert_by_field_name_between_codecs_and_types() {
        let msgpack = Format::of(Codec::Msgpack);
        let v1 = Format::of_state(Codec::Msgpack, Some("{count: u32, name: string}")).unwrap();
        let v2 = Format::of_state(
            Codec::Msgpack,
            Some("{count: u64, letters: u64?, at: {city: string}?}"),
        )
        .unwrap();
        // MessagePack by name into rows: an unknown field dropped.
        let mut old = Vec::new();
        crate::msgpack::from_json(br#"{"name": "ab", "count": 7, "extra": true}"#, &mut old)
            .unwrap();
        let r1 = msgpack.convert(&v1, &old).unwrap();
        assert_eq!(json(&v1, &r1), r#"{"count":7,"name":"ab"}"#);
        // Rows into rows of another type: widened, added optionals null,
        // removed fields dropped.
        let r2 = v1.convert(&v2, &r1).unwrap();
        assert_eq!(json(&v2, &r2), r#"{"count":7,"letters":null,"at":null}"#);
        // Back to MessagePack, and to JSON.
        let back = v2.convert(&msgpack, &r2).unwrap();
        assert_eq!(
            json(&msgpack, &back),
            r#"{"count":7,"letters":null,"at":null}"#
        );
        let text = v2.convert(&Format::of(Codec::Json), &r2).unwrap();
        assert_eq!(text, br#"{"count":7,"letters":null,"at":null}"#);
        // The same type, written another way: the same bytes.
        let same = Format::of_state(Codec::Json, Some("{count:u32,name:string}")).unwrap();
        assert!(v1.same_as(&same) && !v1.same_as(&v2) && !v1.same_as(&msgpack));
        assert_eq!(v1.convert(&same, &r1).unwrap(), r1);
        // What does not fit names the field.
        let e = msgpack
            .convert(&v2, &msgpack_of(r#"{"letters": 1}"#))
            .unwrap_err();
        assert!(e.contains("count"), "{e}");
        let e = msgpack
            .convert(&v1, &msgpack_of(r#"{"count": "x", "name": "a"}"#))
            .unwrap_err();
        assert!(e.contains("field `count`"), "{e}");
        assert!(Format::of_state(Codec::Msgpack, Some("{count: nope}")).is_err());
    }
}
