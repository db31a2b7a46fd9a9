//! The SDK's value codecs.
//!
//! Records and state cross the boundary as bytes in one of two codecs that
//! say the same data model: UTF-8 JSON, which sources read, sinks write and
//! people can read, and MessagePack, which is smaller and faster to decode
//! and encode. The host tells every operator which codec its input, each of
//! its outputs and its state use (a job's `codec` setting; MessagePack by
//! default between components), and the SDK encodes and decodes with it:
//! an operator's code sees only its own types. A record read from a text
//! file is a JSON string; a JSON-lines source hands each line over as it is.
//!
//! The functions here are the JSON codec, for operators that handle JSON
//! themselves (a job parameter holding JSON, say).

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

/// The codec each value is in, as the host says, and encoding with it.
pub(crate) mod wire {
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    pub(crate) use crate::__private::bindings::weir::operator::types::Codec;
    use crate::__private::bindings::weir::operator::types::Codecs as WitCodecs;

    /// The codecs of one operator, as `create` tells them; all JSON by
    /// default (the test harness's).
    #[derive(Clone, Debug)]
    pub(crate) struct Codecs {
        pub(crate) input: Codec,
        pub(crate) output: Codec,
        pub(crate) side_outputs: Vec<(String, Codec)>,
        pub(crate) state: Codec,
    }

    impl Default for Codecs {
        fn default() -> Self {
            Codecs {
                input: Codec::Json,
                output: Codec::Json,
                side_outputs: Vec::new(),
                state: Codec::Json,
            }
        }
    }

    impl From<WitCodecs> for Codecs {
        fn from(c: WitCodecs) -> Self {
            Codecs {
                input: c.input,
                output: c.output,
                side_outputs: c.side_outputs,
                state: c.state,
            }
        }
    }

    /// The codec of the keys of a stream in `codec`: a stream of rows has
    /// MessagePack keys.
    pub(crate) fn key_codec(codec: Codec) -> Codec {
        match codec {
            Codec::Row => Codec::Msgpack,
            c => c,
        }
    }

    /// Encode `value` in `codec` at the end of `buf`.
    pub(crate) fn encode_into<T: Serialize + ?Sized>(codec: Codec, buf: &mut Vec<u8>, value: &T) {
        match codec {
            // The host sends rows only to operators that declare their
            // type (crate::coder): an untyped value never meets them.
            Codec::Row => panic!(
                "the host asked for rows of an untyped value ({})",
                std::any::type_name::<T>()
            ),
            Codec::Json => super::encode_into(buf, value),
            Codec::Msgpack => {
                // Into a Vec this fails only on types serde cannot say
                // (a sequence of unknown length, which serde's own types
                // never are): a bug in the operator's types.
                let mut ser = rmp_serde::Serializer::new(&mut *buf).with_struct_map();
                value
                    .serialize(&mut ser)
                    .unwrap_or_else(|e| panic!("cannot encode a value as MessagePack: {e}"))
            }
        }
    }

    /// Encode `value` in `codec`.
    pub(crate) fn encode<T: Serialize + ?Sized>(codec: Codec, value: &T) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_into(codec, &mut buf, value);
        buf
    }

    /// Decode `bytes`, in `codec`, as a `T`.
    pub(crate) fn decode<T: DeserializeOwned>(codec: Codec, bytes: &[u8]) -> crate::Result<T> {
        match codec {
            Codec::Row => Err(format!(
                "a row reached an untyped reader ({})",
                std::any::type_name::<T>()
            )
            .into()),
            Codec::Json => super::decode(bytes),
            Codec::Msgpack => rmp_serde::from_slice(bytes).map_err(|e| {
                format!(
                    "cannot decode {} as {}: {e}",
                    excerpt(bytes),
                    std::any::type_name::<T>()
                )
                .into()
            }),
        }
    }

    /// A MessagePack value as its JSON text (at most 80 bytes of it) for
    /// an error message; its size when it is not MessagePack at all.
    fn excerpt(bytes: &[u8]) -> String {
        let mut json = Vec::new();
        let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
        let mut ser = serde_json::Serializer::new(&mut json);
        match serde_transcode::transcode(&mut de, &mut ser) {
            Ok(()) => format!("{:?}", String::from_utf8_lossy(&json[..json.len().min(80)])),
            Err(_) => format!("{} bytes of MessagePack", bytes.len()),
        }
    }

    /// Append `bytes`, a value in `from`, to `buf` in `to`: as they are when
    /// the codecs agree, transcoded otherwise (a filter's or a timestamp
    /// assigner's records go on as they came, in their output's codec).
    pub(crate) fn transcode_into(
        from: Codec,
        to: Codec,
        bytes: &[u8],
        buf: &mut Vec<u8>,
    ) -> crate::Result<()> {
        let failed = |e: &dyn std::fmt::Display| -> crate::Error {
            format!("cannot re-encode a record: {e}").into()
        };
        match (from, to) {
            _ if from == to => {
                buf.extend_from_slice(bytes);
                Ok(())
            }
            (Codec::Row, _) | (_, Codec::Row) => {
                Err("rows of an untyped record cannot be re-encoded".into())
            }
            (Codec::Json, _) => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                let mut ser = rmp_serde::Serializer::new(&mut *buf).with_struct_map();
                serde_transcode::transcode(&mut de, &mut ser).map_err(|e| failed(&e))?;
                de.end().map_err(|e| failed(&e))
            }
            (Codec::Msgpack, _) => {
                let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
                let mut ser = serde_json::Serializer::new(&mut *buf);
                serde_transcode::transcode(&mut de, &mut ser).map_err(|e| failed(&e))
            }
        }
    }

    /// The codec of the side output `name` (JSON for one the job does not
    /// route: its records are dropped).
    pub(crate) fn side_output(codecs: &Codecs, name: &str) -> Codec {
        codecs
            .side_outputs
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Codec::Json, |(_, c)| *c)
    }
}
