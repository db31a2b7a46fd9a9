from dataclasses import dataclass
from typing import List, Optional

import pytest

import weir
from weir import _rows
from weir.codec import CodecError
from weir.testing import Harness
from weir.types import F32, I8, I16, U8, U16, U32, U64, text, type_of


@dataclass
class Small:
    id: U64
    k: U32
    name: Optional[str]


def test_the_contract_s_example_row_byte_for_byte():
    node = type_of(Small)
    assert text(node) == "{id: u64, k: u32, name: string?}"
    row = _rows.write(node, Small(7, 3, "ab"))
    assert row.hex(" ") == (
        "00 07 00 00 00 00 00 00 00 03 00 00 00 15 00 00 00 02 00 00 00 61 62"
    )
    assert _rows.read(node, row) == Small(7, 3, "ab")
    # A null optional: its bit set, its slot zeros.
    row = _rows.write(node, Small(1, 2, None))
    assert row[0] == 0b100 and row[13:21] == bytes(8)
    assert _rows.read(node, row) == Small(1, 2, None)


@dataclass
class At:
    lat: float
    lon: F32


@dataclass
class Event:
    id: U64
    tags: List[str]
    scores: List[Optional[I8]]
    at: Optional[At]
    raw: bytes
    extra: dict
    ok: bool
    small: U8


def test_nested_records_lists_optionals_bytes_and_json_round_trip():
    node = type_of(Event)
    assert text(node) == (
        "{id: u64, tags: list<string>, scores: list<i8?>, at: {lat: f64, lon: f32}?, "
        "raw: bytes, extra: json, ok: bool, small: u8}"
    )
    e = Event(2**64 - 1, ["a", "", "ü"], [1, None, -128], At(1.5, 0.5), b"\x00\xff",
              {"x": [1, None]}, True, 255)
    assert _rows.read(node, _rows.write(node, e)) == e
    e2 = Event(0, [], [], None, b"", None, False, 0)
    assert _rows.read(node, _rows.write(node, e2)) == e2
    # Dicts write as well as dataclasses.
    assert _rows.write(node, e.__dict__) == _rows.write(node, e)


def test_the_same_value_reads_the_same_in_every_codec():
    node = type_of(Event)
    e = Event(5, ["x"], [None], At(2.0, 1.0), b"hi", [1, 2], False, 1)
    for codec in ("json", "msgpack", "row"):
        assert _rows.reader(codec, node)(_rows.writer(codec, node)(e)) == e, codec
    # Upstream JSON read by name: unknown fields ignored, a missing optional
    # is None, a whole number read as a float field.
    read = _rows.reader("json", type_of(At))
    assert read(b'{"lon": 1, "lat": 2, "other": "x"}') == At(2.0, 1.0)
    with pytest.raises(CodecError, match="field `lat`"):
        read(b'{"lon": 1}')


def test_bad_values_and_bad_rows_are_clear_errors():
    node = type_of(Small)
    with pytest.raises(CodecError, match="field `id` is None"):
        _rows.write(node, Small(None, 1, None))
    with pytest.raises(CodecError, match="range"):
        _rows.write(node, Small(1, 2**32, None))
    with pytest.raises(CodecError, match="not an int"):
        _rows.write(node, Small("1", 1, None))
    with pytest.raises(CodecError, match="shorter than its 21 bytes"):
        _rows.read(node, bytes(5))
    row = bytearray(_rows.write(node, Small(7, 3, "ab")))
    row[17] = 99  # the name's length, past the row
    with pytest.raises(CodecError, match="outside"):
        _rows.read(node, bytes(row))
    tags = type_of(List[str])
    with pytest.raises(CodecError, match="does not fit"):
        _rows.read(tags, _rows.write(tags, ["a", "b"])[:12])
    with pytest.raises(TypeError, match="has no Weir type"):
        type_of(set)


@dataclass
class Priced:
    id: U64
    dollars: float
    cheap: bool


@dataclass
class Bid:
    id: U64
    k: U32
    price: U64
    ts: int


@weir.map("r-price", input=Bid, output=Priced)
def price(b: Bid) -> Priced:
    return Priced(b.id, 0.908 * b.price, b.price < 100)


@weir.filter("r-even", input=Bid)
def even(b: Bid) -> bool:
    return b.id % 2 == 0


@weir.keyed_process("r-count", input=Bid, output=Priced)
class CountPerKey(weir.KeyedProcess):
    def open(self, ctx):
        self.n = ctx.value_state("n")

    def process(self, b: Bid, ctx):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        yield Priced(ctx.key, float(n), False)


def test_typed_operators_read_and_write_rows_and_plain_values_alike():
    bids = [Bid(i, i % 3, i * 50, 1000 + i) for i in range(4)]
    for rows in (False, True):
        h = Harness("r-price", rows=rows)
        assert h.codecs.input == ("row" if rows else "json")
        assert [h.process(b) for b in bids] == [
            [Priced(i, 0.908 * i * 50, i * 50 < 100)] for i in range(4)
        ]
        h = Harness("r-even", rows=rows)
        assert [out for b in bids for out in h.process(b)] == [bids[0], bids[2]]
        h = Harness("r-count", rows=rows)
        outs = [out for b in bids + bids for out in h.process(b, key=b.k)]
        assert [(o.id, o.dollars) for o in outs] == [
            (0, 1.0), (1, 1.0), (2, 1.0), (0, 2.0), (0, 3.0), (1, 2.0), (2, 2.0), (0, 4.0)
        ]


def test_declared_types_are_checked_when_registered():
    with pytest.raises(TypeError, match="operator `r-bad`: its input type: .*has no Weir type"):
        weir.map("r-bad", input=set)(lambda x: x)
    with pytest.raises(TypeError, match="passes its records on"):
        weir.filter("r-bad-filter", input=Bid, output=Bid)(lambda x: True)


def _fixture():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "types/tests/fixtures/every-kind.json"
    return json.loads(path.read_text())


@dataclass
class AtF:
    lat: float
    lon: F32


@dataclass
class Every:
    id: U64
    tags: List[str]
    scores: List[Optional[I8]]
    at: Optional[AtF]
    raw: bytes
    extra: dict
    ok: bool
    small: U8
    neg: I16
    nested: List[List[U16]]
    none: Optional[str]


def test_a_row_of_every_kind_is_the_rust_writer_s_byte_for_byte():
    fixture = _fixture()
    node = type_of(Every)
    assert text(node) == fixture["type"]
    value = Every(5, ["a", "bc"], [1, None, -3], AtF(1.5, 0.25), b"\x00\xff", {"x": [1, None]},
                  True, 200, -300, [[1, 2], [], [3]], None)
    assert _rows.write(node, value).hex() == fixture["hex"]
    assert _rows.read(node, bytes.fromhex(fixture["hex"])) == value


def test_a_filter_passes_whole_records_on_whatever_fields_it_declares():
    from weir._context import Codecs

    @dataclass
    class IdOnly:
        id: U64

    # Its input is MessagePack of a wider record (a reader of some fields
    # only), its output JSON: the record goes on whole.
    c = Codecs("msgpack", "json", {}, "msgpack", type_of(IdOnly), type_of(IdOnly))
    record = weir.codec.encode("msgpack", {"id": 1, "k": 2})
    assert weir.codec.decode("json", c.transcode(record)) == {"id": 1, "k": 2}
    assert c.read(record) == IdOnly(1)


def test_a_record_of_numbers_only_takes_the_one_call_path_with_the_same_bytes():
    node = type_of(Bid)
    b = Bid(2**64 - 1, 7, 0, -(2**63))
    # A dict goes field by field; the dataclass in one struct call.
    assert _rows.write(node, b) == _rows.write(node, b.__dict__)
    assert _rows.read(node, _rows.write(node, b)) == b
    with pytest.raises(CodecError, match="field `k`: 1.5 is not an int"):
        _rows.write(node, Bid(1, 1.5, 0, 0))
    with pytest.raises(CodecError, match="range"):
        _rows.write(node, Bid(-1, 1, 0, 0))
