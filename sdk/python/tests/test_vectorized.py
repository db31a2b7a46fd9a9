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


@weir.vectorized_map("v-odd", input=Bid, output=Q1)
def odd(c):
    n = len(c["id"])
    kind = c["k"][0]
    base = {"id": c["id"], "k": c["k"], "dollars": [0.0] * n, "doubled": c["price"]}
    if kind == 0:
        return {**base, weir.KEEP: ["yes"] * n}
    if kind == 1:
        return {**base, "doubled": [True] * n}
    if kind == 2:
        return {**base, "dollars": "x" * n}
    return {**base, "extra": [1] * n}


called = []


@weir.vectorized_map("v-count-calls", input=Bid, output=Q1)
def count_calls(c):
    called.append(len(c["id"]))
    return {"id": c["id"], "k": c["k"], "dollars": [1.0] * len(c["id"]), "doubled": c["price"]}


def test_what_a_vectorized_function_returns_is_checked_whole_before_anything_is_emitted():
    h = Harness("v-odd", rows=True)
    for k, message in [
        (0, "weir.KEEP holds something other than True and False"),
        (1, "field `doubled`: True is not an int"),
        (2, "column `dollars` is a str"),
        (3, "the returned columns have extra"),
    ]:
        with pytest.raises(weir.OperatorError, match=message):
            h.process_batch([Bid(1, k, 1, 1), Bid(2, k, 2, 2)])
    h = Harness("v-count-calls", rows=True)
    assert h.process_batch([]) == [] and called == []
    assert len(h.process_batch([Bid(1, 1, 1, 1)])) == 1 and called == [1]


def test_a_bool_in_a_number_field_is_refused_on_every_path():
    from weir import _rows
    from weir.codec import CodecError
    from weir.types import type_of

    with pytest.raises(CodecError, match="True is not an int"):
        _rows.write(type_of(Bid), Bid(True, 1, 1, 1))
