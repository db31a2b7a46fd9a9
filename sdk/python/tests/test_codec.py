import math

import pytest

from weir import codec
from weir.codec import CodecError, decode, encode, transcode


def test_msgpack_matches_the_runtime_byte_for_byte():
    # The bytes the runtime (and the Rust SDK) write for the same values.
    assert encode("msgpack", {"a": 1}) == bytes([0x81, 0xA1, ord("a"), 0x01])
    assert encode("msgpack", {"k": 256}) == bytes([0x81, 0xA1, ord("k"), 0xCD, 0x01, 0x00])
    assert encode("msgpack", ["word", 3]) == b"\x92\xa4word\x03"
    assert encode("msgpack", -1) == b"\xff"
    assert encode("msgpack", -33) == b"\xd0\xdf"
    assert encode("msgpack", 1.0) == b"\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00"
    assert encode("msgpack", "x" * 40)[:2] == b"\xd9\x28"


def test_integers_take_their_shortest_form():
    for n, size in [(0, 1), (127, 1), (128, 2), (255, 2), (256, 3), (65535, 3), (65536, 5),
                    (2**32, 9), (2**64 - 1, 9), (-32, 1), (-33, 2), (-128, 2), (-129, 3),
                    (-(2**15) - 1, 5), (-(2**31) - 1, 9), (-(2**63), 9)]:
        packed = encode("msgpack", n)
        assert len(packed) == size, n
        assert decode("msgpack", packed) == n


@pytest.mark.parametrize("kind", ["json", "msgpack"])
def test_values_round_trip(kind):
    values = [None, True, False, 0, -5, 2**63 - 1, 1.5, -0.25, "", "é" * 300, "x" * 70_000,
              [], [1, [2, [3]]], {}, {"nested": {"list": [1, "two", None]}},
              {str(i): i for i in range(40)}, list(range(20))]
    for v in values:
        assert decode(kind, encode(kind, v)) == v


def test_tuples_are_lists_and_keys_are_strings_in_both_codecs():
    for kind in ("json", "msgpack"):
        assert decode(kind, encode(kind, ("a", 1))) == ["a", 1]
        assert decode(kind, encode(kind, {1: "x", None: "y"})) == {"1": "x", "null": "y"}


def test_bytes_are_msgpack_binary():
    assert decode("msgpack", encode("msgpack", b"\x00\xff")) == b"\x00\xff"
    with pytest.raises(CodecError, match="JSON"):
        encode("json", b"\x00")


def test_bad_values_and_bad_bytes_are_clear_errors():
    with pytest.raises(CodecError, match="64 bits"):
        encode("msgpack", 2**64)
    with pytest.raises(CodecError, match="MessagePack"):
        encode("msgpack", object())
    with pytest.raises(CodecError, match="JSON"):
        encode("json", math.nan)
    with pytest.raises(CodecError, match="cut short"):
        decode("msgpack", b"\x92\x01")
    with pytest.raises(CodecError, match="after a MessagePack value"):
        decode("msgpack", b"\x01\x02")
    with pytest.raises(CodecError, match="extension"):
        decode("msgpack", b"\xd4\x01\x00")
    with pytest.raises(CodecError, match="not UTF-8"):
        decode("msgpack", b"\xa1\xff")
    with pytest.raises(CodecError, match="as JSON"):
        decode("json", b"{nope")


def test_transcode_keeps_bytes_when_the_codecs_agree():
    assert transcode("json", "json", b'{"a": 1}') == b'{"a": 1}'
    assert transcode("json", "msgpack", b'{"a": 1}') == bytes([0x81, 0xA1, ord("a"), 0x01])
    assert transcode("msgpack", "json", b"\x92\xa4word\x03") == b'["word",3]'
    assert codec.JSON == "json" and codec.MSGPACK == "msgpack"
