//! The SDK's value codec: UTF-8 JSON.
//!
//! Every value an operator reads or writes (records, state, map keys) is
//! encoded as JSON text in UTF-8, so that operators written in other
//! languages, sinks and people can read what a Rust operator wrote. A record
//! read from a text file is a JSON string; a JSON-lines source hands each line
//! over as it is.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encode a value as JSON bytes.
///
/// ```
/// assert_eq!(weir::codec::encode(&("a", 1)), b"[\"a\",1]");
/// ```
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Serializing into a Vec only fails for maps with non-string keys, which
    // is a bug in the operator's types: say so loudly.
    serde_json::to_vec(value).unwrap_or_else(|e| panic!("cannot encode a value as JSON: {e}"))
}

/// Decode JSON bytes into a value.
///
/// ```
/// let n: u64 = weir::codec::decode(b"42").unwrap();
/// assert_eq!(n, 42);
/// assert!(weir::codec::decode::<u64>(b"\"x\"").is_err());
/// ```
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> crate::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]).into_owned();
        format!(
            "cannot decode {shown:?} as {}: {e}",
            std::any::type_name::<T>()
        )
        .into()
    })
}

/// Encode a value as JSON at the end of `buf`.
///
/// ```
/// let mut buf = b"x".to_vec();
/// weir::codec::encode_into(&mut buf, &[1, 2]);
/// assert_eq!(buf, b"x[1,2]");
/// ```
pub fn encode_into<T: Serialize + ?Sized>(buf: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(&mut *buf, value)
        .unwrap_or_else(|e| panic!("cannot encode a value as JSON: {e}"))
}
