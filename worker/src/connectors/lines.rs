//! Lines of text decoded into records, for the sources that read lines (a
//! file, a socket): a line as a string, a JSON line as it is, or a JSON line
//! read into its source's type; written in the stream's codec.

use weir_model::RecordBuffer;
use weir_model::codec::Codec;
use weir_model::types::Type;
use weir_model::types::row::{Node, json, msgpack};

/// What a line is.
#[derive(Clone, PartialEq)]
pub enum LineFormat {
    /// A string (the line as a JSON string in JSON).
    Text,
    /// A JSON value, passed on as it is; blank lines skipped.
    JsonLines,
    /// A JSON value read into a row of this type; blank lines skipped.
    Typed(Box<Node>),
}

impl LineFormat {
    /// JSON lines, read into `ty` when the source has a type.
    pub fn json(ty: Option<&Type>) -> LineFormat {
        match ty {
            Some(ty) => LineFormat::Typed(Box::new(Node::of(ty))),
            None => LineFormat::JsonLines,
        }
    }
}

/// Why a line is not a record.
#[derive(Debug)]
pub enum LineError {
    /// It is not JSON.
    Json(String),
    /// It does not fit the source's type.
    Schema(String),
}

/// Decodes lines into records of one codec.
pub struct LineDecoder {
    format: LineFormat,
    codec: Codec,
    /// A row being read, before it is written in another codec.
    row: Vec<u8>,
    /// Check that JSON lines passed through as they are are JSON (when the
    /// source rejects what it cannot decode, rather than leaving it to
    /// their readers to fail on).
    validate: bool,
}

impl LineDecoder {
    /// Lines in `format`, written in `codec`.
    pub fn new(format: LineFormat, codec: Codec) -> LineDecoder {
        LineDecoder {
            format,
            codec,
            row: Vec::new(),
            validate: false,
        }
    }

    /// When `validate`, JSON lines passed through as they are are checked to
    /// be JSON: a source that rejects bad records finds them itself.
    pub fn validating(mut self, validate: bool) -> LineDecoder {
        self.validate = validate;
        self
    }

    /// Decode `line` (its line end removed) into a record at the end of
    /// `batch`; a blank JSON line makes none.
    pub fn push(&mut self, line: &[u8], batch: &mut RecordBuffer) -> Result<(), LineError> {
        self.push_keyed(line, None, None, batch)
    }

    /// [`LineDecoder::push`], the record with `key` and `timestamp` (a
    /// Kafka message's).
    pub fn push_keyed(
        &mut self,
        line: &[u8],
        key: Option<bytes::Bytes>,
        timestamp: Option<i64>,
        batch: &mut RecordBuffer,
    ) -> Result<(), LineError> {
        let codec = self.codec;
        match &self.format {
            LineFormat::Text => {
                let text = String::from_utf8_lossy(line);
                batch.push(key, timestamp, |v| match codec {
                    Codec::Json => json_string(v, &text),
                    Codec::Msgpack => msgpack_str(v, &text),
                    Codec::Row => v.extend_from_slice(text.as_bytes()),
                });
            }
            LineFormat::JsonLines => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                if self.validate && codec != Codec::Msgpack {
                    serde_json::from_slice::<serde::de::IgnoredAny>(line)
                        .map_err(|e| LineError::Json(e.to_string()))?;
                }
                batch.try_push(key, timestamp, |v| match codec {
                    Codec::Json | Codec::Row => {
                        v.extend_from_slice(line);
                        Ok(())
                    }
                    Codec::Msgpack => weir_model::msgpack::from_json(line, v)
                        .map_err(|e| LineError::Json(e.to_string())),
                })?;
            }
            LineFormat::Typed(node) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                let row = &mut self.row;
                batch
                    .try_push(key, timestamp, |v| match codec {
                        Codec::Row => json::read_value(node, line, v),
                        _ => {
                            row.clear();
                            json::read_value(node, line, row).and_then(|()| {
                                match codec {
                                    Codec::Msgpack => msgpack::write_value(node, row, v),
                                    _ => json::write_value(node, row, v),
                                }
                                .map_err(|e| e.to_string())
                            })
                        }
                    })
                    .map_err(LineError::Schema)?;
            }
        }
        Ok(())
    }
}

/// `text` as a MessagePack string at the end of `out`.
pub fn msgpack_str(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec cannot fail.
    let _ = rmp::encode::write_str(out, text);
}

/// `text` as a JSON string at the end of `out`.
pub fn json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(out, text);
}
