"""Python operators for Weir's tests: well-behaved ones and the hostile
catalogue (an exception, an endless loop, a memory bomb)."""

from dataclasses import dataclass
from typing import List, Optional

import weir
from weir.types import U32, U64


@weir.map("py-upper")
def upper(line):
    return line.upper()


def parse(line):
    return int(line)


@weir.map("py-raises")
def raises(line):
    try:
        return parse(line)
    except ValueError:
        raise ValueError(f"cannot parse record {line!r} as a number") from None


@weir.map("py-endless")
def endless(line):
    n = 0
    while True:
        n += 1


@weir.map("py-membomb")
def membomb(line):
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


def window_count(window, count):
    return {"key": window.key, "window_start": window.start,
            "window_end": window.end, "count": count}


@weir.window_aggregate("py-window-count")
class WindowCount(weir.Aggregate):
    """The windowed-counts example's count, folded as records come."""

    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def merge(self, a, b):
        return a + b

    def get_result(self, acc, window):
        return window_count(window, acc)


@weir.window_process("py-window-records")
class WindowRecords(weir.ProcessWindow):
    """The same count, from all of a window's records at once."""

    def process(self, window, elements):
        yield window_count(window, len(elements))


# Typed: the generator's `numbers` in, a record of every kind of field out.
@dataclass
class Number:
    id: U64
    k: U32
    price: U64
    ts: int


@dataclass
class Where:
    k: U32
    ts: int


@dataclass
class Priced:
    id: U64
    dollars: float
    cheap: bool
    label: str
    tags: List[str]
    at: Optional[Where]
    note: Optional[str]


@weir.map("py-typed-price", input=Number, output=Priced)
def typed_price(n: Number) -> Priced:
    return Priced(n.id, 0.908 * n.price, n.price < 100, f"#{n.id}", ["p"] * (n.id % 3),
                  Where(n.k, n.ts) if n.id % 2 == 0 else None, None)


@dataclass
class Mistyped:
    id: U64
    k: str


@weir.map("py-mistyped", input=Mistyped)
def mistyped(n: Mistyped) -> str:
    return n.k


@dataclass
class Q1:
    id: U64
    k: U32
    dollars: float
    doubled: U64


@weir.vectorized_map("py-vectorized-q1", input=Number, output=Q1)
def vectorized_q1(c):
    return {
        "id": c["id"],
        "k": c["k"],
        "dollars": [0.908 * p for p in c["price"]],
        "doubled": [2 * p for p in c["price"]],
        weir.KEEP: [i % 2 == 0 for i in c["id"]],
    }


@weir.keyed_process("py-ttl-count")
class TtlCount(weir.KeyedProcess):
    """A running count per word in states that live an hour: what it reads
    back is what it wrote (the expiry stamps the runtime keeps are never
    seen)."""

    def open(self, ctx):
        self.count = ctx.value_state("count", ttl_ms=3_600_000)
        self.seen = ctx.list_state("seen", ttl_ms=3_600_000)
        self.last = ctx.map_state("last", ttl_ms=3_600_000, refresh_on_read=True)

    def process(self, word, ctx):
        n = (self.count.value() or 0) + 1
        if self.last.get("n") != (n - 1 if n > 1 else None):
            raise AssertionError(f"{word}: map says {self.last.get('n')}, count {n - 1}")
        if len(self.seen.get()) != n - 1:
            raise AssertionError(f"{word}: list holds {len(self.seen.get())}, count {n - 1}")
        self.count.update(n)
        self.seen.add(n)
        self.last.put("n", n)
        yield {"word": word, "count": n}
