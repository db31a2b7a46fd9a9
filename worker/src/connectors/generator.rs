//! The generator source: subtask `i` of `n` makes records `i, i + n,
//! i + 2n, …` of its pattern, at most `rate` per second, in the stream's
//! codec (JSON, MessagePack or rows written directly).

use std::time::{Duration, Instant};

use weir_model::RecordBuffer;
use weir_model::codec::Codec;
use weir_model::connectors::generator::{Generator as Config, GeneratorPattern};
use weir_model::types::Type;
use weir_model::types::row::Node;
use weir_model::{Record, Records};

use super::Source;
use super::lines::{json_string, msgpack_str};
use crate::checkpoint::SplitPosition;

/// Subtask `split.0` of `split.1` of a generator.
pub(super) fn open(
    c: &Config,
    (subtask, parallelism): (u32, u32),
    codec: Codec,
) -> Box<dyn Source> {
    let mut g = Generator::new(c.count, c.pattern, c.rate, subtask, parallelism);
    g.codec = codec;
    if codec == Codec::Row {
        g.row = Some(RowLayout::of(&c.pattern.record_type()));
    }
    if let Some(at) = c.start_at_ms {
        // The schedule starts at that wall-clock time.
        let ahead = at as i64 - weir_host::now_ms();
        g.started = if ahead >= 0 {
            Instant::now() + Duration::from_millis(ahead as u64)
        } else {
            Instant::now()
                .checked_sub(Duration::from_millis(ahead.unsigned_abs()))
                .unwrap_or_else(Instant::now)
        };
    }
    Box::new(g)
}

/// Generated records; subtask `i` of `n` makes records `i, i + n, i + 2n, …`.
struct Generator {
    next: u64,
    /// The first number, which with `step` names the split.
    first: u64,
    step: u64,
    count: Option<u64>,
    pattern: GeneratorPattern,
    rate: Option<u64>,
    started: Instant,
    made: u64,
    /// What its records are written in.
    codec: Codec,
    /// Its records' layout, when they are written as rows.
    row: Option<RowLayout>,
}

impl Generator {
    fn new(
        count: Option<u64>,
        pattern: GeneratorPattern,
        rate: Option<u64>,
        subtask: u32,
        parallelism: u32,
    ) -> Self {
        Generator {
            next: u64::from(subtask),
            first: u64::from(subtask),
            step: u64::from(parallelism.max(1)),
            count,
            pattern,
            rate,
            started: Instant::now(),
            made: 0,
            codec: Codec::Json,
            row: None,
        }
    }
}

/// A word of the generator's vocabulary of 1,000: syllables, so that words
/// look like words and have varied lengths.
pub fn vocabulary_word(i: u64) -> String {
    const SYLLABLES: [&str; 10] = [
        "ka", "lo", "mi", "ren", "tu", "sha", "vo", "nel", "di", "pa",
    ];
    let i = i % 1000;
    let mut w = String::new();
    w.push_str(SYLLABLES[(i % 10) as usize]);
    w.push_str(SYLLABLES[((i / 10) % 10) as usize]);
    if i >= 100 {
        w.push_str(SYLLABLES[((i / 100) % 10) as usize]);
    }
    w
}

/// Deterministic pseudo-random numbers (splitmix64).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Source for Generator {
    fn snapshot(&self) -> Vec<SplitPosition> {
        vec![SplitPosition {
            range: None,
            split: format!("{} mod {}", self.first, self.step),
            offset: self.next,
        }]
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        let id = format!("{} mod {}", self.first, self.step);
        if !positions.is_empty() && !positions.iter().any(|p| p.split == id) {
            let held: Vec<&str> = positions.iter().map(|p| p.split.as_str()).collect();
            anyhow::bail!(
                "it holds no position of the generator's split {id} (it holds: {}); the source cannot resume where it was",
                held.join(", ")
            );
        }
        if let Some(p) = positions.iter().find(|p| p.split == id) {
            if p.offset % self.step != self.first % self.step {
                anyhow::bail!(
                    "the checkpoint's position {} is not in split {id}",
                    p.offset
                );
            }
            // Records made so far count against the rate from here on.
            self.made = (p.offset - self.first) / self.step;
            self.started = Instant::now()
                - self.rate.filter(|r| *r > 0).map_or(Duration::ZERO, |r| {
                    Duration::from_secs_f64(self.made as f64 / r as f64)
                });
            self.next = p.offset;
        }
        Ok(())
    }

    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        Ok(self.next_records(max)?.map(Records::into_list))
    }

    fn next_records(&mut self, max: usize) -> anyhow::Result<Option<Records>> {
        let mut max = max;
        let now = Instant::now();
        if now < self.started {
            // Not due yet (`start-at-ms`).
            std::thread::sleep((self.started - now).min(Duration::from_millis(100)));
            return Ok(Some(Records::default()));
        }
        if let Some(rate) = self.rate.filter(|r| *r > 0) {
            // Wait until the rate allows another record, then take what it allows.
            let allowed = (self.started.elapsed().as_secs_f64() * rate as f64) as u64;
            if allowed <= self.made {
                let wait =
                    (self.made + 1) as f64 / rate as f64 - self.started.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.1)));
                return Ok(Some(Records::default()));
            }
            max = max.min((allowed - self.made) as usize);
        }
        let mut batch = RecordBuffer::with_capacity(max, max * 56);
        while batch.len() < max {
            if self.count.is_some_and(|c| self.next >= c) {
                break;
            }
            let n = self.next;
            let (pattern, codec) = (self.pattern, self.codec);
            let row = &self.row;
            batch.push(None, None, |v| match (codec, row) {
                (Codec::Row, Some(layout)) => pattern.write(n, &mut BinaryRow::new(v, layout)),
                (Codec::Msgpack, _) => pattern.write(n, &mut MsgpackRow(v)),
                _ => pattern.write(
                    n,
                    &mut JsonRow {
                        out: v,
                        first: true,
                    },
                ),
            });
            self.next += self.step;
        }
        self.made += batch.len() as u64;
        Ok(if batch.is_empty() && self.count.is_some() {
            None
        } else {
            Some(batch.finish_records())
        })
    }
}

/// Writes one generated record in a codec: a map of fields, or a string.
trait RecordWriter {
    /// A map of `len` fields begins.
    fn map(&mut self, len: u32);
    /// An integer field.
    fn uint(&mut self, name: &str, x: u64);
    /// A string field: `prefix` followed by the digits of `x`.
    fn tagged(&mut self, name: &str, prefix: char, x: u64);
    /// The map ends.
    fn end(&mut self);
    /// The record is a string.
    fn text(&mut self, text: &str);
}

/// JSON, written directly: formatting machinery was a tenth of a
/// passthrough job's time.
struct JsonRow<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl JsonRow<'_> {
    fn name(&mut self, name: &str) {
        self.out
            .extend_from_slice(if self.first { b"{\"" } else { b",\"" });
        self.first = false;
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }
}

impl RecordWriter for JsonRow<'_> {
    fn map(&mut self, _: u32) {
        self.first = true;
    }
    fn uint(&mut self, name: &str, x: u64) {
        self.name(name);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
    }
    fn tagged(&mut self, name: &str, prefix: char, x: u64) {
        self.name(name);
        self.out.push(b'"');
        self.out.push(prefix as u8);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
        self.out.push(b'"');
    }
    fn end(&mut self) {
        self.out.push(b'}');
    }
    fn text(&mut self, text: &str) {
        json_string(self.out, text);
    }
}

/// MessagePack: the same maps, keys in the same order, integers in their
/// shortest form (as a key-by key must be).
struct MsgpackRow<'a>(&'a mut Vec<u8>);

impl RecordWriter for MsgpackRow<'_> {
    // Writing into a Vec cannot fail.
    fn map(&mut self, len: u32) {
        let _ = rmp::encode::write_map_len(self.0, len);
    }
    fn uint(&mut self, name: &str, x: u64) {
        msgpack_str(self.0, name);
        let _ = rmp::encode::write_uint(self.0, x);
    }
    fn tagged(&mut self, name: &str, prefix: char, x: u64) {
        msgpack_str(self.0, name);
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(x);
        let _ = rmp::encode::write_str_len(self.0, 1 + digits.len() as u32);
        self.0.push(prefix as u8);
        self.0.extend_from_slice(digits.as_bytes());
    }
    fn end(&mut self) {}
    fn text(&mut self, text: &str) {
        msgpack_str(self.0, text);
    }
}

/// Rows of the pattern's type ([`GeneratorPattern::record_type`]): the
/// pattern writes the type's fields in their order.
struct BinaryRow<'a> {
    out: &'a mut Vec<u8>,
    layout: &'a RowLayout,
    start: usize,
    field: usize,
}

/// Where a generated row's fields go: computed once per source, read per
/// field.
struct RowLayout {
    /// Bytes of bitmap and slots.
    fixed: usize,
    /// Each field's slot: offset and width.
    slots: Vec<(usize, usize)>,
}

impl RowLayout {
    /// The layout of rows of `ty`, a record type (a string's is empty).
    fn of(ty: &Type) -> RowLayout {
        match Node::of(ty) {
            Node::Record { fields, fixed, .. } => RowLayout {
                fixed,
                slots: fields.iter().map(|f| (f.offset, f.node.width())).collect(),
            },
            _ => RowLayout {
                fixed: 0,
                slots: Vec::new(),
            },
        }
    }
}

impl<'a> BinaryRow<'a> {
    fn new(out: &'a mut Vec<u8>, layout: &'a RowLayout) -> Self {
        BinaryRow {
            out,
            layout,
            start: 0,
            field: 0,
        }
    }

    /// The next field's slot offset (in the buffer) and width.
    fn next_slot(&mut self) -> (usize, usize) {
        let (offset, width) = self.layout.slots[self.field];
        self.field += 1;
        (self.start + offset, width)
    }
}

impl RecordWriter for BinaryRow<'_> {
    fn map(&mut self, _: u32) {
        self.start = self.out.len();
        self.out.resize(self.start + self.layout.fixed, 0);
        self.field = 0;
    }
    fn uint(&mut self, _: &str, x: u64) {
        let (at, width) = self.next_slot();
        // Little-endian: a narrower slot holds the low bytes.
        self.out[at..at + width].copy_from_slice(&x.to_le_bytes()[..width]);
    }
    fn tagged(&mut self, _: &str, prefix: char, x: u64) {
        let (at, _) = self.next_slot();
        let payload = self.out.len();
        self.out.push(prefix as u8);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
        weir_model::types::row::patch_var(self.out, self.start, at - self.start, payload);
    }
    fn end(&mut self) {}
    fn text(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }
}

/// What each generator pattern makes.
trait Pattern {
    fn write(self, n: u64, w: &mut impl RecordWriter);
}

impl Pattern for GeneratorPattern {
    fn write(self, n: u64, w: &mut impl RecordWriter) {
        match self {
            GeneratorPattern::Sequence => {
                w.map(1);
                w.uint("seq", n);
                w.end();
            }
            GeneratorPattern::Bids => {
                let r = mix(n);
                w.map(3);
                w.tagged("key", 'a', r % 10_000);
                w.uint("price", (r >> 20) % 10_000);
                w.uint("ts", n / 100);
                w.end();
            }
            GeneratorPattern::Numbers => {
                w.map(4);
                w.uint("id", n);
                w.uint("k", n % 10_000);
                w.uint("price", n % 1000);
                w.uint("ts", n / 100);
                w.end();
            }
            GeneratorPattern::Words => {
                let r = mix(n);
                let words: Vec<String> =
                    (0..8).map(|k| vocabulary_word(mix(r + k) % 1000)).collect();
                w.text(&words.join(" "));
            }
        }
    }
}
