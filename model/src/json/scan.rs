//! A fast path for reading one pointer out of a JSON document: a
//! validating scan over the bytes that allocates nothing and stops short of
//! nothing (the whole document is checked, as the slow path checks it).
//! It answers only what it is sure of; anything unusual (escaped keys,
//! invalid input, deep nesting) is left to serde_json, which gives the
//! exact answer or error.

use std::borrow::Cow;

/// serde_json's nesting limit.
const MAX_DEPTH: usize = 128;

/// Why the scan gives up: the slow path decides.
pub(super) struct Unsure;

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

/// Where `path` is in the document `text`: `Ok(Some((start, end)))` for
/// the value's bytes, `Ok(None)` when the (valid) document has no such
/// value.
pub(super) fn find(text: &str, path: &[Cow<'_, str>]) -> Result<Option<(usize, usize)>, Unsure> {
    let mut s = Scanner {
        bytes: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    s.space();
    let found = s.value(Some(path))?;
    s.space();
    if s.at != s.bytes.len() {
        return Err(Unsure);
    }
    Ok(found)
}

impl Scanner<'_> {
    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Result<u8, Unsure> {
        self.bytes.get(self.at).copied().ok_or(Unsure)
    }

    fn eat(&mut self, b: u8) -> Result<(), Unsure> {
        if self.peek()? == b {
            self.at += 1;
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    /// One value; `path` is where it lies relative to the wanted one
    /// (`None`: off the path).
    fn value(&mut self, path: Option<&[Cow<'_, str>]>) -> Result<Option<(usize, usize)>, Unsure> {
        let start = self.at;
        let inner = match path {
            Some([]) => None,
            other => other,
        };
        let mut found = None;
        match self.peek()? {
            b'{' => found = self.object(inner)?,
            b'[' => found = self.array(inner)?,
            b'"' => {
                self.string()?;
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(Unsure),
        }
        if path == Some(&[]) {
            return Ok(Some((start, self.at)));
        }
        Ok(found)
    }

    fn nest(&mut self) -> Result<(), Unsure> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unsure);
        }
        Ok(())
    }

    fn object(&mut self, path: Option<&[Cow<'_, str>]>) -> Result<Option<(usize, usize)>, Unsure> {
        self.nest()?;
        self.at += 1;
        self.space();
        let mut found = None;
        if self.peek()? == b'}' {
            self.at += 1;
            self.depth -= 1;
            return Ok(None);
        }
        loop {
            let (from, to, escaped) = self.string()?;
            if escaped && path.is_some() {
                // A key with escapes: compare it unescaped, in serde.
                return Err(Unsure);
            }
            self.space();
            self.eat(b':')?;
            self.space();
            let below = match path {
                Some(p) if found.is_none() && &self.bytes[from..to] == p[0].as_bytes() => {
                    Some(&p[1..])
                }
                _ => None,
            };
            let f = self.value(below)?;
            if below.is_some() {
                found = f;
            }
            self.space();
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.space();
                }
                b'}' => {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(found);
                }
                _ => return Err(Unsure),
            }
        }
    }

    fn array(&mut self, path: Option<&[Cow<'_, str>]>) -> Result<Option<(usize, usize)>, Unsure> {
        self.nest()?;
        self.at += 1;
        self.space();
        let wanted: Option<usize> = path.and_then(|p| p[0].parse().ok());
        let mut found = None;
        if self.peek()? == b']' {
            self.at += 1;
            self.depth -= 1;
            return Ok(None);
        }
        let mut i = 0usize;
        loop {
            let below = match path {
                Some(p) if Some(i) == wanted => Some(&p[1..]),
                _ => None,
            };
            let f = self.value(below)?;
            if below.is_some() {
                found = f;
            }
            i += 1;
            self.space();
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.space();
                }
                b']' => {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(found);
                }
                _ => return Err(Unsure),
            }
        }
    }

    /// A string: the bytes between its quotes, and whether it has escapes.
    fn string(&mut self) -> Result<(usize, usize, bool), Unsure> {
        self.eat(b'"')?;
        let from = self.at;
        let mut escaped = false;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Ok((from, self.at - 1, escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.at += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                        b'u' => {
                            let hex = self.bytes.get(self.at + 1..self.at + 5).ok_or(Unsure)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(Unsure);
                            }
                            // Surrogates are serde's to judge.
                            if matches!(hex[0], b'd' | b'D') {
                                return Err(Unsure);
                            }
                            self.at += 5;
                        }
                        _ => return Err(Unsure),
                    }
                }
                0..=0x1f => return Err(Unsure),
                _ => self.at += 1,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Unsure> {
        if self.bytes.get(self.at..self.at + word.len()) == Some(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    fn digits(&mut self) -> Result<(), Unsure> {
        let from = self.at;
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
        if self.at == from { Err(Unsure) } else { Ok(()) }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<(), Unsure> {
        if self.peek()? == b'-' {
            self.at += 1;
        }
        if self.peek()? == b'0' {
            self.at += 1;
        } else {
            self.digits()?;
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.digits()?;
        }
        Ok(())
    }
}
