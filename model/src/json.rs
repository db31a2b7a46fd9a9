//! Reading one field of a JSON record without building the whole document:
//! the runtime does it for every record it keys by a JSON pointer or takes
//! event time from.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// The value at `pointer` (RFC 6901, e.g. `/user/id`) in the JSON document
/// `bytes`, as its raw text; `None` when the document has no such value.
/// Fails when `bytes` is not one JSON document.
///
/// ```
/// use weir_model::json::pointer_raw;
/// let doc = br#"{"user": {"id": "u1", "tags": [3, 4]}, "ts": 17}"#;
/// assert_eq!(pointer_raw(doc, "/ts").unwrap().unwrap().get(), "17");
/// assert_eq!(pointer_raw(doc, "/user/id").unwrap().unwrap().get(), r#""u1""#);
/// assert_eq!(pointer_raw(doc, "/user/tags/1").unwrap().unwrap().get(), "4");
/// assert!(pointer_raw(doc, "/user/name").unwrap().is_none());
/// assert!(pointer_raw(doc, "/ts/x").unwrap().is_none());
/// assert!(pointer_raw(b"{not json", "/ts").is_err());
/// assert!(pointer_raw(br#"{"a": 1} 2"#, "/a").is_err());
/// ```
pub fn pointer_raw<'a>(
    bytes: &'a [u8],
    pointer: &str,
) -> Result<Option<&'a RawValue>, serde_json::Error> {
    let path: Vec<Cow<'_, str>> = match pointer {
        "" => Vec::new(),
        p => p
            .strip_prefix('/')
            .unwrap_or(p)
            .split('/')
            .map(|t| {
                if t.contains('~') {
                    Cow::Owned(t.replace("~1", "/").replace("~0", "~"))
                } else {
                    Cow::Borrowed(t)
                }
            })
            .collect(),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = Walk { path: &path }.deserialize(&mut de)?;
    de.end()?;
    Ok(found)
}

/// The value at `pointer` in the JSON document `bytes`, as compact JSON:
/// the same bytes for the same value however the document spells it.
///
/// ```
/// use weir_model::json::pointer_compact;
/// assert_eq!(pointer_compact(br#"{"k": "a"}"#, "/k").unwrap().unwrap(), br#""a""#);
/// assert_eq!(pointer_compact(br#"{"k": [1, 2]}"#, "/k").unwrap().unwrap(), b"[1,2]");
/// assert_eq!(pointer_compact(br#"{"k": "\u0061"}"#, "/k").unwrap().unwrap(), br#""a""#);
/// ```
pub fn pointer_compact(bytes: &[u8], pointer: &str) -> Result<Option<Vec<u8>>, serde_json::Error> {
    let Some(raw) = pointer_raw(bytes, pointer)? else {
        return Ok(None);
    };
    let text = raw.get();
    // A string without escapes is already compact; anything else is
    // re-encoded (numbers, escapes, objects and arrays with spaces).
    let simple = text.starts_with('"') && !text.contains('\\');
    if simple {
        return Ok(Some(text.as_bytes().to_vec()));
    }
    let value: serde_json::Value = serde_json::from_str(text)?;
    Ok(Some(serde_json::to_vec(&value)?))
}

/// Walks a pointer's path through a document, skipping everything else.
struct Walk<'p> {
    path: &'p [Cow<'p, str>],
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.path.is_empty() {
            return <&RawValue>::deserialize(d).map(Some);
        }
        d.deserialize_any(self)
    }
}

use serde::Deserialize;

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if found.is_none() && key == self.path[0] {
                found = map.next_value_seed(Walk {
                    path: &self.path[1..],
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let wanted: Option<usize> = self.path[0].parse().ok();
        let mut found = None;
        let mut i = 0;
        loop {
            if Some(i) == wanted {
                match seq.next_element_seed(Walk {
                    path: &self.path[1..],
                })? {
                    Some(f) => found = f,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(found)
    }

    // Scalars have no fields.
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against `serde_json::Value::pointer` on assorted documents.
    #[test]
    fn agrees_with_value_pointer() {
        let docs = [
            r#"{"a": {"b": [10, {"c": "x"}]}, "d~e": 1, "f/g": 2, "": 3}"#,
            r#"[{"a": 1}, {"a": 2.5}, null, true, "s"]"#,
            r#""just a string""#,
            r#"{"a": {"a": {"a": 7}}, "a2": []}"#,
        ];
        let pointers = [
            "", "/a", "/a/b", "/a/b/0", "/a/b/1/c", "/a/b/2", "/d~0e", "/f~1g", "/", "/0/a",
            "/1/a", "/2", "/4", "/9", "/a/a/a", "/a2/0", "/x", "/a/b/x",
        ];
        for d in docs {
            let v: serde_json::Value = serde_json::from_str(d).unwrap();
            for p in pointers {
                let want = v.pointer(p).map(|v| serde_json::to_vec(v).unwrap());
                let got = pointer_compact(d.as_bytes(), p).unwrap();
                assert_eq!(got, want, "{p} in {d}");
            }
        }
    }
}
