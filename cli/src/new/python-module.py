"""The operators of {name}: split lines into words, count each word."""

import re

import weir

WORD = re.compile(r"[^\W_]+")


@weir.flat_map("split-words")
def split_words(line):
    """The words of a line, lowercased."""
    return [w.lower() for w in WORD.findall(line)]


@weir.keyed_process("count")
class Count(weir.KeyedProcess):
    """The running count of each word."""

    def open(self, ctx):
        self.count = ctx.value_state("count")

    def process(self, word, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield {"word": word, "count": n}
