"""Word count: split lines into lowercase words, count each word."""

import re

import weir
from weir.types import U64

# A word is a maximal run of Unicode letters and digits (str.isalnum).
WORD = re.compile(r"[^\W_]+")


@weir.flat_map("split-words")
def split_words(line: str):
    """The words of a line, lowercased."""
    return [w.lower() for w in WORD.findall(line)]


@weir.keyed_process("count")
class Count(weir.KeyedProcess):
    """The running count of each word, emitted with every occurrence."""

    def open(self, ctx: weir.OpenContext) -> None:
        # Kept as rows of u64 (a job restored from a savepoint of the Rust
        # word count, whose count is untyped, has it converted).
        self.count = ctx.value_state("count", type=U64)

    def process(self, word: str, ctx: weir.Context):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield {"word": word, "count": n}
