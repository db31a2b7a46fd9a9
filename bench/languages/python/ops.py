"""The language benchmark's operators in Python, as a user writes them: the
same names and results as bench/operators (Rust) and ../js."""

import re
from dataclasses import dataclass

import weir
from weir.types import U32, U64

WORD = re.compile(r"[^\W_]+")


@weir.flat_map("q1")
def q1(e):
    """SELECT id, k, 0.908 * price, price * 2 ... WHERE MOD(id, 2) = 0"""
    if e["id"] % 2 == 0:
        yield {"id": e["id"], "k": e["k"], "dollars": 0.908 * e["price"], "doubled": e["price"] * 2}


@weir.map("q0")
def q0(e):
    """A stateless map: every event, decoded and encoded again."""
    return e


@dataclass
class Event:
    id: U64
    k: U32
    price: U64
    ts: int


@dataclass
class Q1:
    id: U64
    k: U32
    dollars: float
    doubled: U64


@weir.flat_map("q1-typed", input=Event, output=Q1)
def q1_typed(e: Event):
    """q1 on the declared types: the generator's rows in, rows out."""
    if e.id % 2 == 0:
        yield Q1(e.id, e.k, 0.908 * e.price, e.price * 2)


@weir.vectorized_map("q1-vectorized", input=Event, output=Q1)
def q1_vectorized(c):
    """q1 over a batch's columns, as PyFlink's pandas functions."""
    return {
        "id": c["id"],
        "k": c["k"],
        "dollars": [0.908 * p for p in c["price"]],
        "doubled": [2 * p for p in c["price"]],
        weir.KEEP: [i % 2 == 0 for i in c["id"]],
    }


@weir.map("q0-typed", input=Event, output=Event)
def q0_typed(e: Event) -> Event:
    """q0 on the declared types."""
    return e


@weir.flat_map("split-words")
def split_words(line):
    return [w.lower() for w in WORD.findall(line)]


@weir.keyed_process("count")
class Count(weir.KeyedProcess):
    def open(self, ctx):
        self.count = ctx.value_state("count")

    def process(self, word, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield {"word": word, "count": n}


@weir.window_aggregate("windowed-count")
class WindowedCount(weir.Aggregate):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def merge(self, a, b):
        return a + b

    def get_result(self, acc, window):
        return {"k": window.key, "window_start": window.start, "window_end": window.end, "n": acc}
