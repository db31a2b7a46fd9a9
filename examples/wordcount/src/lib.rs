//! # Word count
//!
//! Lines of text → words (lowercased; a word is a maximal run of alphanumeric
//! characters) → keyed by word → a running count per word, emitted as
//! `{"word": w, "count": c}` on every update.
//!
//! Run it (from the repository root):
//!
//! ```text
//! weir run examples/wordcount --param input=examples/wordcount/data/sample.txt \
//!     --param output=/tmp/counts.jsonl --parallelism 4
//! ```

use serde::Serialize;
use weir::{Collector, Context, KeyedProcess, OpenContext, Row, ValueState};

/// Splits a line into lowercase words.
pub fn split_words(line: String, out: &mut Collector<String>) {
    for word in line
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        out.emit(word.to_lowercase());
    }
}

/// The running count of one word: a typed record (`Row`), which leaves the
/// operator as a row and is written as JSON by the sink.
#[derive(Serialize, Row)]
pub struct WordCount {
    /// The word.
    pub word: String,
    /// How often it was seen so far.
    pub count: u64,
}

/// Counts the records of each key (word).
pub struct Count {
    count: ValueState<u64>,
}

impl KeyedProcess for Count {
    type In = String;
    type Out = WordCount;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(Count {
            count: ctx.value_state("count")?,
        })
    }

    fn process(&mut self, word: String, ctx: &mut Context<WordCount>) -> weir::Result<()> {
        let count = self.count.get()?.unwrap_or(0) + 1;
        self.count.set(count);
        ctx.emit(WordCount { word, count });
        Ok(())
    }
}

weir::export_operators! {
    flat_map "split-words" => split_words;
    keyed_process "count" => Count;
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::testing::Harness;

    #[test]
    fn splits_on_non_alphanumerics_and_lowercases() {
        let mut h = Harness::flat_map(split_words);
        let out: Vec<String> = h.process(&(), "Hello, wörld! It's 2024", None).unwrap();
        assert_eq!(out, ["hello", "wörld", "it", "s", "2024"]);
    }

    #[test]
    fn counts_per_word() {
        let mut h = Harness::keyed_process::<Count>(&[]).unwrap();
        for _ in 0..2 {
            h.process::<_, _, serde_json::Value>("a", "a", None)
                .unwrap();
        }
        let out: Vec<serde_json::Value> = h.process("b", "b", None).unwrap();
        assert_eq!(out, [serde_json::json!({"word": "b", "count": 1})]);
        let out: Vec<serde_json::Value> = h.process("a", "a", None).unwrap();
        assert_eq!(out, [serde_json::json!({"word": "a", "count": 3})]);
    }
}
