//! The operators of {name}: split lines into words, count each word.

use serde::Serialize;
use weir::{Collector, Context, KeyedProcess, OpenContext, Row, ValueState};

/// Splits a line into lowercase words.
pub fn split_words(line: String, out: &mut Collector<String>) {
    for word in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        out.emit(word.to_lowercase());
    }
}

/// A word and how often it came so far: a typed record (`Row`), which
/// leaves the operator as a row and is written as JSON by the sink.
#[derive(Serialize, Row)]
pub struct WordCount {
    /// The word.
    pub word: String,
    /// Its count.
    pub count: u64,
}

/// The running count of each word.
pub struct Count {
    count: ValueState<u64>,
}

impl KeyedProcess for Count {
    type In = String;
    type Out = WordCount;

    fn open(ctx: &mut OpenContext) -> weir::Result<Self> {
        Ok(Count { count: ctx.value_state("count")? })
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
    fn splits_and_counts() {
        let mut h = Harness::flat_map(split_words);
        let words: Vec<String> = h.process(&(), "The fox, the dog", None).unwrap();
        assert_eq!(words, ["the", "fox", "the", "dog"]);
        let mut h = Harness::keyed_process::<Count>(&[]).unwrap().msgpack();
        let _: Vec<serde_json::Value> = h.process("the", "the", None).unwrap();
        let out: Vec<serde_json::Value> = h.process("the", "the", None).unwrap();
        assert_eq!(out, [serde_json::json!({"word": "the", "count": 2})]);
    }
}
