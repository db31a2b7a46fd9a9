//! Reading one field of a JSON record without building the whole document:
//! the runtime does it for every record it keys by a JSON pointer or takes
//! event time from.

mod scan;

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
    if let Ok(text) = std::str::from_utf8(bytes) {
        match scan::find(text, &path) {
            Ok(None) => return Ok(None),
            Ok(Some((start, end))) => return serde_json::from_str(&text[start..end]).map(Some),
            Err(scan::Unsure) => {}
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = Walk { path: &path }.deserialize(&mut de)?;
    de.end()?;
    Ok(found)
}

/// Whether `text` is a JSON whole number that serde_json writes back the
/// same (no sign on zero, no leading zeros, within `i64`).
fn is_compact_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" && digits.len() == text.len() || !digits.starts_with('0'))
}

/// The value at `pointer` in the JSON document `bytes`, as compact JSON:
/// the same bytes for the same value however the document spells it.
/// Borrowed from `bytes` when the document already spells it compactly (a
/// string without escapes, an integer, `true`, `false`, `null`).
///
/// ```
/// use std::borrow::Cow;
/// use weir_model::json::pointer_compact;
/// let doc = br#"{"k": "a"}"#;
/// assert!(matches!(pointer_compact(doc, "/k").unwrap().unwrap(), Cow::Borrowed(br#""a""#)));
/// assert_eq!(*pointer_compact(br#"{"k": [1, 2]}"#, "/k").unwrap().unwrap(), *b"[1,2]");
/// assert_eq!(*pointer_compact(br#"{"k": "\u0061"}"#, "/k").unwrap().unwrap(), *br#""a""#);
/// ```
pub fn pointer_compact<'a>(
    bytes: &'a [u8],
    pointer: &str,
) -> Result<Option<Cow<'a, [u8]>>, serde_json::Error> {
    let Some(raw) = pointer_raw(bytes, pointer)? else {
        return Ok(None);
    };
    let text = raw.get();
    // A string without escapes is already compact; anything else is
    // re-encoded (numbers, escapes, objects and arrays with spaces).
    let simple = text.starts_with('"') && !text.contains('\\')
        || is_compact_integer(text)
        || matches!(text, "true" | "false" | "null");
    if simple {
        return Ok(Some(Cow::Borrowed(text.as_bytes())));
    }
    let value: serde_json::Value = serde_json::from_str(text)?;
    Ok(Some(Cow::Owned(serde_json::to_vec(&value)?)))
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

/// Several JSON pointers, read from a document in one pass (what
/// [`pointer_raw`] gives for each, without parsing the document once per
/// pointer).
///
/// ```
/// use weir_model::json::Pointers;
/// let p = Pointers::new(&["/id", "/user/name", "/missing"]);
/// let got = p.read(br#"{"id": 7, "user": {"name": "ana"}}"#).unwrap();
/// let got: Vec<Option<&str>> = got.iter().map(|v| v.map(|r| r.get())).collect();
/// assert_eq!(got, [Some("7"), Some(r#""ana""#), None]);
/// ```
#[derive(Debug, Clone)]
pub struct Pointers {
    paths: Vec<Vec<String>>,
}

fn split_pointer(pointer: &str) -> Vec<String> {
    match pointer {
        "" => Vec::new(),
        p => p
            .strip_prefix('/')
            .unwrap_or(p)
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    }
}

impl Pointers {
    /// The pointers, in the order [`Pointers::read`] answers.
    pub fn new(pointers: &[&str]) -> Pointers {
        Pointers {
            paths: pointers.iter().map(|p| split_pointer(p)).collect(),
        }
    }

    /// The value at each pointer in `bytes`, as raw text; fails when `bytes`
    /// is not one JSON document.
    pub fn read<'a>(
        &self,
        bytes: &'a [u8],
    ) -> Result<Vec<Option<&'a RawValue>>, serde_json::Error> {
        let mut out = vec![None; self.paths.len()];
        let paths = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_slice(), i))
            .collect();
        let mut de = serde_json::Deserializer::from_slice(bytes);
        Multi {
            paths,
            out: &mut out,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok(out)
    }
}

/// The paths still to find below the current value, with their answers'
/// places.
struct Multi<'p, 'o, 'de> {
    paths: Vec<(&'p [String], usize)>,
    out: &'o mut [Option<&'de RawValue>],
}

impl<'de> DeserializeSeed<'de> for Multi<'_, '_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if !self.paths.iter().any(|(p, _)| p.is_empty()) {
            return d.deserialize_any(self);
        }
        // This value itself is wanted: take it whole, and look for any
        // deeper path inside its text.
        let raw = <&'de RawValue>::deserialize(d)?;
        let mut deeper = Vec::new();
        for (p, i) in self.paths {
            if p.is_empty() {
                self.out[i] = Some(raw);
            } else {
                deeper.push((p, i));
            }
        }
        if !deeper.is_empty() {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            Multi {
                paths: deeper,
                out: self.out,
            }
            .deserialize(&mut de)
            .map_err(serde::de::Error::custom)?;
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Multi<'_, '_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            // The common case first: a field wanted as it is, nothing below.
            let mut leaf = None;
            let mut deeper = false;
            for (p, i) in &self.paths {
                if self.out[*i].is_none() && p[0] == key {
                    if p.len() == 1 && leaf.is_none() {
                        leaf = Some(*i);
                    } else {
                        deeper = true;
                    }
                }
            }
            match (leaf, deeper) {
                (None, false) => {
                    map.next_value::<IgnoredAny>()?;
                }
                (Some(i), false) => self.out[i] = Some(map.next_value::<&'de RawValue>()?),
                _ => {
                    let below: Vec<(&[String], usize)> = self
                        .paths
                        .iter()
                        .filter(|(p, i)| self.out[*i].is_none() && p[0] == key)
                        .map(|(p, i)| (&p[1..], *i))
                        .collect();
                    map.next_value_seed(Multi {
                        paths: below,
                        out: &mut *self.out,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let below: Vec<(&[String], usize)> = self
                .paths
                .iter()
                .filter(|(p, _)| p[0].parse::<usize>().ok() == Some(i))
                .map(|(p, j)| (&p[1..], *j))
                .collect();
            let more = if below.is_empty() {
                seq.next_element::<IgnoredAny>()?.is_some()
            } else {
                seq.next_element_seed(Multi {
                    paths: below,
                    out: &mut *self.out,
                })?
                .is_some()
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    // Scalars have no fields.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast scan and serde_json agree on what is a document, and on
    /// every answer, over documents that are and are not JSON.
    #[test]
    fn the_fast_path_agrees_with_serde_on_odd_documents() {
        let docs = [
            r#"{"k": 01}"#,
            r#"{"k": 1,}"#,
            r#"{"k": 1} x"#,
            r#"{"k": "a\"b", "j": 2}"#,
            r#"{"k\u0041": 1, "kA": 2}"#,
            r#"{"kA": 2, "k\u0041": 1}"#,
            r#"{"k": "\ud800"}"#,
            r#"{"k": -0, "j": 1e5, "l": 1.5E-3, "m": -}"#,
            r#"{"k": [1, [2, {"k": 3}]], "k": 4}"#,
            r#"{"j": {"k": 1}, "j": {"k": 2}}"#,
            "{\"k\": \"tab\there\"}",
            r#" {"k" : true , "j":null} "#,
            r#"{"k": tru}"#,
            r#"[1, 2,]"#,
            r#"{"k": 12345678901234567890123}"#,
            "",
            "   ",
        ];
        for d in docs {
            for p in ["/k", "/j", "/kA", "/k/1/1/k", "/0", ""] {
                let path: Vec<Cow<'_, str>> = match p {
                    "" => Vec::new(),
                    p => p[1..].split('/').map(Cow::Borrowed).collect(),
                };
                let mut de = serde_json::Deserializer::from_str(d);
                let slow = Walk { path: &path }
                    .deserialize(&mut de)
                    .and_then(|f| de.end().map(|()| f))
                    .map(|f| f.map(|r| r.get().to_owned()))
                    .ok();
                let fast = pointer_raw(d.as_bytes(), p)
                    .map(|f| f.map(|r| r.get().to_owned()))
                    .ok();
                assert_eq!(fast, slow, "{p} in {d:?}");
            }
        }
        assert_eq!(
            *pointer_compact(br#"{"k": -0}"#, "/k").unwrap().unwrap(),
            *b"-0.0"
        );
        assert_eq!(
            pointer_compact(br#"{"k": 007}"#.as_slice(), "/k").ok(),
            None
        );
        assert_eq!(
            *pointer_compact(br#"{"k": -12}"#, "/k").unwrap().unwrap(),
            *b"-12"
        );
        assert_eq!(
            *pointer_compact(br#"{"k": 1.50}"#, "/k").unwrap().unwrap(),
            *b"1.5"
        );
    }

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
                assert_eq!(got.map(Cow::into_owned), want, "{p} in {d}");
            }
            // The slow path alone: the same answers.
            for p in pointers {
                let path: Vec<Cow<'_, str>> = match p {
                    "" => Vec::new(),
                    p => p[1..]
                        .split('/')
                        .map(|t| Cow::Owned(t.replace("~1", "/").replace("~0", "~")))
                        .collect(),
                };
                let mut de = serde_json::Deserializer::from_str(d);
                let slow = Walk { path: &path }.deserialize(&mut de).unwrap();
                assert_eq!(
                    slow.map(RawValue::get),
                    pointer_raw(d.as_bytes(), p).unwrap().map(RawValue::get),
                    "{p} in {d}, slow and fast"
                );
            }
            // All at once, in one pass: the same answers.
            let all = Pointers::new(&pointers).read(d.as_bytes()).unwrap();
            for (p, got) in pointers.iter().zip(all) {
                let want = pointer_raw(d.as_bytes(), p).unwrap().map(RawValue::get);
                assert_eq!(got.map(RawValue::get), want, "{p} in {d}, with the others");
            }
        }
    }
}
