from dataclasses import dataclass
from typing import Optional

import pytest

import weir
from weir.testing import Harness
from weir.types import U32, U64


@dataclass
class Bid:
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


@weir.vectorized_map("v-q1", input=Bid, output=Q1)
def q1(c):
    return {
        "id": c["id"],
        "k": c["k"],
        "dollars": [0.908 * p for p in c["price"]],
        "doubled": [2 * p for p in c["price"]],
        weir.KEEP: [i % 2 == 0 for i in c["id"]],
    }


@dataclass
class Labelled:
    id: U64
    label: Optional[str]


@weir.vectorized_map("v-label", input=Bid, output=Labelled)
def label(c):
    return {"id": c["id"], "label": [None if p == 0 else f"#{p}" for p in c["price"]]}


@weir.vectorized_map("v-short", input=Bid, output=Labelled)
def short(c):
    return {"id": c["id"][:1], "label": [None]}


def test_a_vectorized_map_sees_a_batch_as_columns_and_keeps_timestamps():
    bids = [Bid(i, i % 3, i * 50, 1000 + i) for i in range(6)]
    for rows in (True, False):
        h = Harness("v-q1", rows=rows)
        out = h.process_batch(bids, timestamps=[b.ts for b in bids])
        assert out == [Q1(i, i % 3, 0.908 * i * 50, 100 * i) for i in (0, 2, 4)]
        assert h.last_timestamps == [1000, 1002, 1004]
        h = Harness("v-label", rows=rows)
        assert h.process_batch(bids[:2]) == [Labelled(0, None), Labelled(1, "#50")]
        assert h.process_batch([]) == []


def test_columns_that_do_not_fit_the_output_are_clear_errors():
    h = Harness("v-short", rows=True)
    with pytest.raises(weir.OperatorError, match="column `id` has 1 values for 2 records"):
        h.process_batch([Bid(1, 1, 1, 1), Bid(2, 2, 2, 2)])
    with pytest.raises(TypeError, match="a vectorized map's input is a record type"):
        weir.vectorized_map("v-bad", input=int, output=Q1)(lambda c: c)
