//! MessagePack, the compact binary codec for records inside a job.
//!
//! A job's edges (its sources and sinks) speak JSON; between operators a
//! record may travel as MessagePack instead: the same data model (null,
//! booleans, integers, floats, strings, arrays, maps), smaller, and cheaper to
//! decode and encode in every language that has a MessagePack library. The
//! runtime reads such records in three places and this module serves them:
//! a `key-by` JSON pointer ([`pointer`]), and a sink or a built-in operator
//! that needs the record as JSON ([`to_json`], and [`from_json`] for the way
//! back). Transcoding is exact: a value encoded as MessagePack and written as
//! JSON here gives the bytes serde_json gives for the same value.

use std::borrow::Cow;

use rmp::Marker;

/// A record that is not the MessagePack the operation needs.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MsgpackError(String);

fn error(message: impl Into<String>) -> MsgpackError {
    MsgpackError(message.into())
}

/// The JSON text of the MessagePack value `bytes`, appended to `out`.
/// MessagePack that JSON cannot say (extension types, a map key JSON cannot
/// hold), a value cut short and trailing bytes are errors.
///
/// ```
/// let mut json = Vec::new();
/// weir_model::msgpack::to_json(&[0x82, 0xa1, b'a', 0x01, 0xa1, b'b', 0x90], &mut json).unwrap();
/// assert_eq!(json, br#"{"a":1,"b":[]}"#);
/// ```
pub fn to_json(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), MsgpackError> {
    let end = walk(bytes, 0, true)?;
    if end != bytes.len() {
        return Err(error(format!(
            "{} bytes after a MessagePack value of {end}",
            bytes.len() - end
        )));
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    let mut ser = serde_json::Serializer::new(out);
    serde_transcode::transcode(&mut de, &mut ser)
        .map_err(|e| error(format!("MessagePack that JSON cannot hold: {e}")))
}

/// The MessagePack of the JSON text `json`, appended to `out` (maps keep
/// their keys as strings, integers take their shortest form).
///
/// ```
/// let mut packed = Vec::new();
/// weir_model::msgpack::from_json(br#"{"a": 1}"#, &mut packed).unwrap();
/// assert_eq!(packed, [0x81, 0xa1, b'a', 0x01]);
/// ```
pub fn from_json(json: &[u8], out: &mut Vec<u8>) -> Result<(), MsgpackError> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let mut ser = rmp_serde::Serializer::new(out).with_struct_map();
    serde_transcode::transcode(&mut de, &mut ser).map_err(|e| error(format!("not JSON: {e}")))?;
    de.end().map_err(|e| error(format!("not JSON: {e}")))
}

/// The value at the JSON pointer `pointer` (RFC 6901) in the MessagePack
/// value `bytes`, as MessagePack: borrowed from `bytes` when it is already in
/// its shortest form, re-encoded otherwise, so that equal values give equal
/// bytes (a key-by key must). Map keys match a pointer's token as JSON would
/// see them (an integer key `5` as `"5"`); array elements by index. `None`
/// when there is no such value.
///
/// ```
/// use weir_model::msgpack::pointer;
/// let doc = [0x81, 0xa1, b'k', 0xcd, 0x01, 0x00]; // {"k": 256}
/// assert_eq!(&*pointer(&doc, "/k").unwrap().unwrap(), &[0xcd, 0x01, 0x00]);
/// assert!(pointer(&doc, "/x").unwrap().is_none());
/// ```
pub fn pointer<'a>(bytes: &'a [u8], pointer: &str) -> Result<Option<Cow<'a, [u8]>>, MsgpackError> {
    let end = skip(bytes, 0)?;
    if end != bytes.len() {
        return Err(error(format!(
            "{} bytes after a MessagePack value of {end}",
            bytes.len() - end
        )));
    }
    let mut at = 0usize;
    if !pointer.is_empty() {
        let Some(path) = pointer.strip_prefix('/') else {
            return Err(error(format!(
                "a JSON pointer starts with `/`: {pointer:?}"
            )));
        };
        for token in path.split('/') {
            let token: Cow<'_, str> = if token.contains('~') {
                Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(token)
            };
            match child(bytes, at, &token)? {
                Some(next) => at = next,
                None => return Ok(None),
            }
        }
    }
    let value = &bytes[at..skip(bytes, at)?];
    if is_shortest(value) {
        return Ok(Some(Cow::Borrowed(value)));
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(value);
    let mut out = Vec::with_capacity(value.len());
    let mut ser = rmp_serde::Serializer::new(&mut out).with_struct_map();
    serde_transcode::transcode(&mut de, &mut ser)
        .map_err(|e| error(format!("cannot re-encode a key: {e}")))?;
    Ok(Some(Cow::Owned(out)))
}

/// Where the child `token` of the value at `at` starts, if it has one.
fn child(bytes: &[u8], at: usize, token: &str) -> Result<Option<usize>, MsgpackError> {
    let (marker, mut pos) = marker(bytes, at)?;
    match marker {
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
            let n = length(bytes, marker, &mut pos)?;
            for _ in 0..n {
                let key_end = skip(bytes, pos)?;
                let matches = key_matches(&bytes[pos..key_end], token);
                if matches {
                    return Ok(Some(key_end));
                }
                pos = skip(bytes, key_end)?;
            }
            Ok(None)
        }
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
            let n = length(bytes, marker, &mut pos)?;
            // An index as JSON pointers spell it: digits, no leading zero.
            let index = match token.parse::<usize>() {
                Ok(i) if token == "0" || !token.starts_with('0') && !token.starts_with('+') => i,
                _ => return Ok(None),
            };
            if index >= n {
                return Ok(None);
            }
            for _ in 0..index {
                pos = skip(bytes, pos)?;
            }
            Ok(Some(pos))
        }
        _ => Ok(None),
    }
}

/// Whether a map key (MessagePack) is `token` as JSON would spell the key.
fn key_matches(key: &[u8], token: &str) -> bool {
    let Ok((marker, mut pos)) = marker(key, 0) else {
        return false;
    };
    match marker {
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            length(key, marker, &mut pos).is_ok_and(|n| &key[pos..pos + n] == token.as_bytes())
        }
        Marker::FixPos(_)
        | Marker::FixNeg(_)
        | Marker::U8
        | Marker::U16
        | Marker::U32
        | Marker::U64
        | Marker::I8
        | Marker::I16
        | Marker::I32
        | Marker::I64 => {
            let mut json = Vec::new();
            to_json(key, &mut json).is_ok() && json == token.as_bytes()
        }
        _ => false,
    }
}

/// Whether a scalar is in its shortest encoding (containers are re-encoded
/// to be sure).
fn is_shortest(value: &[u8]) -> bool {
    let Ok((marker, pos)) = marker(value, 0) else {
        return false;
    };
    let unsigned = |n: usize| {
        value[pos..pos + n]
            .iter()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b))
    };
    let signed = |n: usize| {
        let u = unsigned(n);
        let shift = 64 - 8 * n as u32;
        ((u << shift) as i64) >> shift
    };
    match marker {
        Marker::Null | Marker::True | Marker::False | Marker::FixPos(_) | Marker::FixNeg(_) => true,
        Marker::FixStr(_) | Marker::F64 => true,
        Marker::Str8 => value.len() - 2 > 31,
        Marker::Str16 => value.len() - 3 > 255,
        Marker::Str32 => value.len() - 5 > 65_535,
        Marker::U8 => unsigned(1) > 127,
        Marker::U16 => unsigned(2) > 255,
        Marker::U32 => unsigned(4) > 65_535,
        Marker::U64 => unsigned(8) > 0xffff_ffff,
        // Negative numbers only: a signed encoding of a non-negative number
        // is not the shortest (rmp writes those unsigned).
        Marker::I8 => signed(1) < -32,
        Marker::I16 => signed(2) < -128,
        Marker::I32 => signed(4) < -32_768,
        Marker::I64 => signed(8) < -2_147_483_648,
        _ => false,
    }
}

/// The marker at `at` and the position after it.
fn marker(bytes: &[u8], at: usize) -> Result<(Marker, usize), MsgpackError> {
    let b = *bytes
        .get(at)
        .ok_or_else(|| error("MessagePack ends in the middle of a value"))?;
    Ok((Marker::from_u8(b), at + 1))
}

/// `n` bytes at `pos` as a big-endian number; moves `pos` past them.
fn number(bytes: &[u8], pos: &mut usize, n: usize) -> Result<usize, MsgpackError> {
    let b = bytes
        .get(*pos..*pos + n)
        .ok_or_else(|| error("MessagePack ends in the middle of a length"))?;
    *pos += n;
    Ok(b.iter().fold(0usize, |acc, &x| acc << 8 | usize::from(x)))
}

/// The length (elements, pairs or bytes) that `marker` announces, reading
/// its length field at `pos`.
fn length(bytes: &[u8], marker: Marker, pos: &mut usize) -> Result<usize, MsgpackError> {
    Ok(match marker {
        Marker::FixMap(n) | Marker::FixArray(n) | Marker::FixStr(n) => usize::from(n),
        Marker::Str8 | Marker::Bin8 => number(bytes, pos, 1)?,
        Marker::Str16 | Marker::Bin16 | Marker::Array16 | Marker::Map16 => number(bytes, pos, 2)?,
        Marker::Str32 | Marker::Bin32 | Marker::Array32 | Marker::Map32 => number(bytes, pos, 4)?,
        _ => 0,
    })
}

/// Where the value starting at `at` ends; an error if it is cut short or
/// uses the reserved marker.
fn skip(bytes: &[u8], at: usize) -> Result<usize, MsgpackError> {
    walk(bytes, at, false)
}

/// [`skip`], and with `json_only` an error for extension types too.
fn walk(bytes: &[u8], at: usize, json_only: bool) -> Result<usize, MsgpackError> {
    // Containers to finish: how many values each still has to skip. An
    // explicit stack, so that deep nesting cannot overflow the thread's.
    let mut pending: Vec<usize> = Vec::new();
    let mut pos = at;
    loop {
        let (m, mut next) = marker(bytes, pos)?;
        let ext = matches!(
            m,
            Marker::FixExt1
                | Marker::FixExt2
                | Marker::FixExt4
                | Marker::FixExt8
                | Marker::FixExt16
                | Marker::Ext8
                | Marker::Ext16
                | Marker::Ext32
        );
        if ext && json_only {
            return Err(error(
                "a MessagePack extension type has no JSON form (write plain values)",
            ));
        }
        let payload = match m {
            Marker::Reserved => return Err(error("MessagePack uses the reserved byte 0xc1")),
            Marker::Null | Marker::True | Marker::False | Marker::FixPos(_) | Marker::FixNeg(_) => {
                0
            }
            Marker::U8 | Marker::I8 => 1,
            Marker::U16 | Marker::I16 => 2,
            Marker::U32 | Marker::I32 | Marker::F32 => 4,
            Marker::U64 | Marker::I64 | Marker::F64 => 8,
            Marker::FixExt1 => 2,
            Marker::FixExt2 => 3,
            Marker::FixExt4 => 5,
            Marker::FixExt8 => 9,
            Marker::FixExt16 => 17,
            Marker::Ext8 => number(bytes, &mut next, 1)? + 1,
            Marker::Ext16 => number(bytes, &mut next, 2)? + 1,
            Marker::Ext32 => number(bytes, &mut next, 4)? + 1,
            Marker::FixStr(_)
            | Marker::Str8
            | Marker::Str16
            | Marker::Str32
            | Marker::Bin8
            | Marker::Bin16
            | Marker::Bin32 => length(bytes, m, &mut next)?,
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                let n = length(bytes, m, &mut next)?;
                if n > 0 {
                    pending.push(n);
                }
                pos = next;
                if n > 0 {
                    continue;
                }
                0
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                let n = length(bytes, m, &mut next)?;
                let values = n
                    .checked_mul(2)
                    .ok_or_else(|| error("a MessagePack map is too long"))?;
                pos = next;
                if values > 0 {
                    pending.push(values);
                    continue;
                }
                0
            }
        };
        pos = next
            .checked_add(payload)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| error("MessagePack ends in the middle of a value"))?;
        // One value done: count it against the containers it finishes.
        loop {
            match pending.last_mut() {
                None => return Ok(pos),
                Some(left) => {
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                    pending.pop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    fn packed<T: Serialize>(v: &T) -> Vec<u8> {
        rmp_serde::to_vec_named(v).unwrap()
    }

    fn as_json(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        to_json(bytes, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[derive(Serialize)]
    struct Event<'a> {
        id: u64,
        name: &'a str,
        price: f64,
        ratio: f32,
        tags: Vec<&'a str>,
        missing: Option<i32>,
        nested: std::collections::BTreeMap<u32, i64>,
        bytes: &'a serde_bytes_like::Bytes,
    }

    mod serde_bytes_like {
        /// Bytes that serialize as bytes (MessagePack `bin`, a JSON array).
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    /// Through MessagePack and back to JSON: what serde_json writes itself.
    #[test]
    fn transcoding_to_json_gives_serde_json_s_bytes() {
        let bytes = serde_bytes_like::Bytes(vec![0, 255]);
        let e = Event {
            id: u64::MAX,
            name: "ünï \"q\" \n",
            price: 0.908 * 17.0,
            ratio: 1.1,
            tags: vec!["a", ""],
            missing: None,
            nested: [(1, -1), (300, i64::MIN)].into(),
            bytes: &bytes,
        };
        assert_eq!(as_json(&packed(&e)), serde_json::to_string(&e).unwrap());
        for v in [
            json!(null),
            json!(-0.0),
            json!(1e300),
            json!(-5),
            json!([[], {}, [[1]]]),
            json!({"a": {"b": [1, 2.5, "x", true, null]}}),
            json!("x".repeat(70_000)),
        ] {
            assert_eq!(as_json(&packed(&v)), serde_json::to_string(&v).unwrap());
            let mut back = Vec::new();
            from_json(serde_json::to_string(&v).unwrap().as_bytes(), &mut back).unwrap();
            assert_eq!(back, packed(&v), "{v}");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        for bad in [
            &[][..],
            &[0xc1],
            &[0x92, 0x01],
            &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
            &[0xdf, 0xff, 0xff, 0xff, 0xff],
            &[0x01, 0x02],
        ] {
            assert!(to_json(bad, &mut out).is_err(), "{bad:?}");
            assert!(pointer(bad, "/a").is_err(), "{bad:?}");
        }
        // An extension type is MessagePack, but not JSON.
        assert!(to_json(&[0xd4, 0x01, 0x02], &mut out).is_err());
        assert!(from_json(b"{\"a\":", &mut out).is_err());
        assert!(from_json(b"1 2", &mut out).is_err());
        // Deep nesting is walked without recursion.
        let deep: Vec<u8> = std::iter::repeat_n(0x91, 100_000).chain([0xc0]).collect();
        assert_eq!(skip(&deep, 0).unwrap(), deep.len());
    }

    #[test]
    fn pointers_find_what_json_pointers_find_in_the_same_document() {
        let docs = [
            json!({"a": {"b": [10, {"c": "x"}]}, "d~e": 1, "f/g": 2, "": 3}),
            json!([{"a": 1}, {"a": 2.5}, null, true, "s"]),
            json!("just a string"),
            json!({"a": {"a": {"a": 7}}, "a2": [], "k": -40_000}),
        ];
        let pointers = [
            "", "/a", "/a/b", "/a/b/0", "/a/b/1/c", "/a/b/2", "/d~0e", "/f~1g", "/", "/0/a",
            "/1/a", "/2", "/4", "/9", "/01", "/a/a/a", "/a2/0", "/x", "/a/b/x", "/k",
        ];
        for d in &docs {
            let bytes = packed(d);
            for p in pointers {
                let want = d.pointer(p).map(packed);
                let got = pointer(&bytes, p).unwrap().map(Cow::into_owned);
                assert_eq!(got, want, "{p} in {d}");
            }
        }
        // Integer map keys match as JSON spells them.
        let m: std::collections::BTreeMap<i32, &str> = [(5, "five"), (-1, "minus")].into();
        let bytes = packed(&m);
        assert_eq!(
            pointer(&bytes, "/5").unwrap().unwrap().as_ref(),
            packed(&"five")
        );
        assert_eq!(
            pointer(&bytes, "/-1").unwrap().unwrap().as_ref(),
            packed(&"minus")
        );
    }

    #[test]
    fn keys_come_out_in_their_shortest_form_whatever_the_writer_chose() {
        // {"k": 5} with 5 written as a u16, {"k": "ab"} with a str8, and
        // {"k": [5]} with the 5 as a u32: the keys a shortest writer gives.
        let cases: [(&[u8], Vec<u8>); 4] = [
            (&[0x81, 0xa1, b'k', 0xcd, 0x00, 0x05], packed(&5)),
            (&[0x81, 0xa1, b'k', 0xd9, 0x02, b'a', b'b'], packed(&"ab")),
            (&[0x81, 0xa1, b'k', 0x91, 0xce, 0, 0, 0, 5], packed(&[5])),
            (&[0x81, 0xa1, b'k', 0xd0, 0x05], packed(&5)),
        ];
        for (doc, want) in cases {
            let got = pointer(doc, "/k").unwrap().unwrap();
            assert!(matches!(got, Cow::Owned(_)), "{doc:?}");
            assert_eq!(*got, *want, "{doc:?}");
        }
        // Already the shortest: borrowed.
        for v in [
            json!(5),
            json!(-33),
            json!(300),
            json!(-200),
            json!("x"),
            json!(1.5),
        ] {
            let doc = packed(&json!({ "k": v }));
            let got = pointer(&doc, "/k").unwrap().unwrap();
            assert!(matches!(got, Cow::Borrowed(_)), "{v}");
            assert_eq!(*got, *packed(&v));
        }
    }
}
