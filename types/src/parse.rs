//! The text syntax of types:
//!
//! ```text
//! type    = primary "?"?                      an optional: `string?`
//! primary = scalar | "string" | "bytes" | "json"
//!         | "list<" type ">" | "optional<" type ">"
//!         | "{" [field ("," field)* [","]] "}"
//! field   = (name | "\"quoted name\"") ":" type
//! scalar  = bool | i8 | i16 | i32 | i64 | u8 | u16 | u32 | u64 | f32 | f64
//! ```

use std::str::FromStr;

use crate::ty::{Field, Record, Type};

/// A type's text that does not parse: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseTypeError {
    /// The text.
    pub text: String,
    /// The character where it went wrong (0-based).
    pub at: usize,
    /// What was wrong there.
    pub message: String,
}

impl std::fmt::Display for ParseTypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "type {:?}: {} (at character {})",
            self.text,
            self.message,
            self.at + 1
        )
    }
}

impl std::error::Error for ParseTypeError {}

/// The deepest nesting a type may have: a bound for the parser's recursion
/// and for every walk over a type.
pub const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    text: &'a str,
    chars: Vec<char>,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ParseTypeError {
        ParseTypeError {
            text: self.text.to_owned(),
            at: self.pos,
            message: message.into(),
        }
    }

    fn skip_spaces(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_spaces();
        self.chars.get(self.pos).copied()
    }

    fn expect(&mut self, c: char) -> Result<(), ParseTypeError> {
        match self.peek() {
            Some(got) if got == c => {
                self.pos += 1;
                Ok(())
            }
            Some(got) => Err(self.error(format!("expected `{c}`, found `{got}`"))),
            None => Err(self.error(format!("expected `{c}`, found the end"))),
        }
    }

    fn word(&mut self) -> String {
        self.skip_spaces();
        let start = self.pos;
        while self
            .chars
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn ty(&mut self, depth: usize) -> Result<Type, ParseTypeError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let start = self.pos;
        let ty = self.primary(depth)?;
        let mut ty = ty;
        while self.peek() == Some('?') {
            if ty.is_optional() {
                self.pos = start;
                self.skip_spaces();
                return Err(self.error("an optional of an optional (`T??`) is not a type"));
            }
            self.pos += 1;
            ty = ty.optional();
        }
        Ok(ty)
    }

    fn primary(&mut self, depth: usize) -> Result<Type, ParseTypeError> {
        if self.peek() == Some('{') {
            return self.record(depth);
        }
        let start = self.pos;
        let word = self.word();
        let ty = match word.as_str() {
            "bool" => Type::Bool,
            "i8" => Type::I8,
            "i16" => Type::I16,
            "i32" => Type::I32,
            "i64" => Type::I64,
            "u8" => Type::U8,
            "u16" => Type::U16,
            "u32" => Type::U32,
            "u64" => Type::U64,
            "f32" => Type::F32,
            "f64" => Type::F64,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "json" => Type::Json,
            "list" | "optional" => {
                self.expect('<')?;
                let inner = self.ty(depth + 1)?;
                self.expect('>')?;
                if word == "list" {
                    Type::List(Box::new(inner))
                } else if inner.is_optional() {
                    self.pos = start;
                    return Err(self.error("an optional of an optional is not a type"));
                } else {
                    inner.optional()
                }
            }
            "" => {
                return Err(match self.peek() {
                    Some(c) => self.error(format!("expected a type, found `{c}`")),
                    None => self.error("expected a type, found the end"),
                });
            }
            other => {
                self.pos = start;
                self.skip_spaces();
                return Err(self.error(format!(
                    "unknown type `{other}` (expected bool, i8, i16, i32, i64, u8, u16, u32, u64, \
                     f32, f64, string, bytes, json, list<T>, T? or a record {{name: T, ...}})"
                )));
            }
        };
        Ok(ty)
    }

    fn record(&mut self, depth: usize) -> Result<Type, ParseTypeError> {
        self.expect('{')?;
        let mut fields: Vec<Field> = Vec::new();
        loop {
            if self.peek() == Some('}') {
                self.pos += 1;
                return Ok(Type::Record(Record { fields }));
            }
            let at = self.pos;
            let name = if self.peek() == Some('"') {
                self.quoted()?
            } else {
                let w = self.word();
                if w.is_empty() {
                    return Err(match self.peek() {
                        Some(c) => self.error(format!("expected a field name, found `{c}`")),
                        None => self.error("expected a field name or `}`, found the end"),
                    });
                }
                w
            };
            if fields.iter().any(|f| f.name == name) {
                self.pos = at;
                self.skip_spaces();
                return Err(self.error(format!("field `{name}` appears twice")));
            }
            self.expect(':')?;
            let ty = self.ty(depth + 1)?;
            fields.push(Field { name, ty });
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {}
                Some(c) => return Err(self.error(format!("expected `,` or `}}`, found `{c}`"))),
                None => return Err(self.error("expected `,` or `}`, found the end")),
            }
        }
    }

    /// A field name in JSON string syntax.
    fn quoted(&mut self) -> Result<String, ParseTypeError> {
        let start = self.pos;
        let mut end = start + 1;
        let mut escaped = false;
        while let Some(&c) = self.chars.get(end) {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                break;
            }
            end += 1;
        }
        if end >= self.chars.len() {
            return Err(self.error("a quoted field name without its closing `\"`"));
        }
        let literal: String = self.chars[start..=end].iter().collect();
        let name: String =
            serde_json::from_str(&literal).map_err(|e| self.error(format!("{literal}: {e}")))?;
        self.pos = end + 1;
        Ok(name)
    }
}

impl FromStr for Type {
    type Err = ParseTypeError;

    fn from_str(text: &str) -> Result<Type, ParseTypeError> {
        let mut p = Parser {
            text,
            chars: text.chars().collect(),
            pos: 0,
        };
        let ty = p.ty(0)?;
        if let Some(c) = p.peek() {
            return Err(p.error(format!("unexpected `{c}` after the type")));
        }
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_back_from_its_text() {
        for text in [
            "bool",
            "u8",
            "i64",
            "f32",
            "string?",
            "list<bytes?>",
            "{}",
            "json",
            "{a: u64, \"with space\": {b: list<list<i16>>}?, c: json?}",
        ] {
            let ty: Type = text.parse().unwrap();
            assert_eq!(ty.to_string(), text);
            assert_eq!(ty.to_string().parse::<Type>().unwrap(), ty);
        }
        assert_eq!(
            " { a : u64 , b:string, } "
                .parse::<Type>()
                .unwrap()
                .to_string(),
            "{a: u64, b: string}"
        );
    }

    #[test]
    fn errors_say_where_and_what() {
        let err = |t: &str| t.parse::<Type>().unwrap_err().to_string();
        assert!(err("u65").contains("unknown type `u65`"), "{}", err("u65"));
        assert_eq!(
            err("{a: u8, a: u16}"),
            "type \"{a: u8, a: u16}\": field `a` appears twice (at character 9)"
        );
        assert!(err("u8??").contains("optional of an optional"));
        assert!(err("optional<u8?>").contains("optional of an optional"));
        assert!(err("list<u8").contains("expected `>`, found the end"));
        assert!(err("{a u8}").contains("expected `:`"));
        assert!(err("{a: u8 b: u8}").contains("expected `,` or `}`"));
        assert!(err("u8 u8").contains("unexpected `u`"));
        assert!(err("").contains("expected a type, found the end"));
        let deep = "list<".repeat(40) + "u8" + &">".repeat(40);
        assert!(err(&deep).contains("deeper than 32"));
    }
}
