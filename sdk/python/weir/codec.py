"""The codecs records and state cross the boundary in.

Weir says every value in one data model (null, booleans, integers, floats,
strings, byte strings, arrays, maps) and encodes it in one of two codecs: UTF-8
JSON at a job's edges (sources, sinks, built-in operators) and MessagePack,
smaller and faster, between components and in state (a job's ``codec``
setting). The runtime tells each operator which codec its input, outputs and
state use and the SDK encodes and decodes with it, so an operator's code sees
only Python values: ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``list`` (tuples are written as lists) and ``dict``.

The encodings are the Rust SDK's: a value written by an operator in one
language reads the same in any other. Integers take their shortest
MessagePack form, floats are 64-bit, maps keep their keys as strings (an
integer key ``1`` is written ``"1"``, as JSON would).

>>> encode("msgpack", {"a": [1, -1, 1.5]}).hex()
'81a1619301ffcb3ff8000000000000'
>>> decode("json", encode("json", ("word", 3)))
['word', 3]
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["JSON", "MSGPACK", "CodecError", "encode", "decode", "transcode"]

JSON = "json"
MSGPACK = "msgpack"


class CodecError(ValueError):
    """A value that cannot be encoded, or bytes that are not a value."""


_json_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode(codec: str, value: Any) -> bytes:
    """Encode ``value`` in ``codec`` (``"json"`` or ``"msgpack"``)."""
    if codec == MSGPACK:
        out = bytearray()
        _pack(value, out)
        return bytes(out)
    try:
        return _json_encoder.encode(value).encode()
    except (TypeError, ValueError) as e:
        raise CodecError(f"cannot encode {_shown(value)} as JSON: {e}") from None


def decode(codec: str, data: bytes) -> Any:
    """Decode ``data``, one value in ``codec``."""
    if codec == MSGPACK:
        try:
            value, end = _unpack(data, 0)
        except (IndexError, struct.error):
            raise CodecError(f"{len(data)} bytes of MessagePack cut short") from None
        if end != len(data):
            raise CodecError(f"{len(data) - end} bytes after a MessagePack value of {end}")
        return value
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        shown = bytes(data[:80]).decode("utf-8", "replace")
        raise CodecError(f"cannot decode {shown!r} as JSON: {e}") from None


def transcode(source: str, target: str, data: bytes) -> bytes:
    """The value ``data`` in ``source`` written in ``target`` (the same bytes
    when the codecs agree)."""
    if source == target:
        return bytes(data)
    return encode(target, decode(source, data))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_pack_f64 = struct.Struct(">Bd").pack
_pack_b8 = struct.Struct(">BB").pack
_pack_b16 = struct.Struct(">BH").pack
_pack_b32 = struct.Struct(">BI").pack
_pack_b64 = struct.Struct(">BQ").pack
_pack_i8 = struct.Struct(">Bb").pack
_pack_i16 = struct.Struct(">Bh").pack
_pack_i32 = struct.Struct(">Bi").pack
_pack_i64 = struct.Struct(">Bq").pack


def _map_key(key: Any) -> str:
    # As JSON writes keys that are not strings.
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return _json_encoder.encode(key)
    raise CodecError(f"a map key must be a string or a number, not {type(key).__name__}")


def _pack(value: Any, out: bytearray) -> None:
    if value is None:
        out.append(0xC0)
    elif value is True:
        out.append(0xC3)
    elif value is False:
        out.append(0xC2)
    elif type(value) is str:
        _pack_str(value, out)
    elif isinstance(value, int):
        _pack_int(value, out)
    elif isinstance(value, float):
        out += _pack_f64(0xCB, value)
    elif isinstance(value, str):
        _pack_str(value, out)
    elif isinstance(value, (list, tuple)):
        n = len(value)
        if n < 16:
            out.append(0x90 | n)
        elif n < 0x10000:
            out += _pack_b16(0xDC, n)
        else:
            out += _pack_b32(0xDD, n)
        for item in value:
            _pack(item, out)
    elif isinstance(value, dict):
        n = len(value)
        if n < 16:
            out.append(0x80 | n)
        elif n < 0x10000:
            out += _pack_b16(0xDE, n)
        else:
            out += _pack_b32(0xDF, n)
        for k, v in value.items():
            _pack_str(_map_key(k), out)
            _pack(v, out)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        n = len(value)
        if n < 0x100:
            out += _pack_b8(0xC4, n)
        elif n < 0x10000:
            out += _pack_b16(0xC5, n)
        else:
            out += _pack_b32(0xC6, n)
        out += value
    else:
        raise CodecError(f"cannot encode {_shown(value)} ({type(value).__name__}) as MessagePack")


def _pack_str(value: str, out: bytearray) -> None:
    b = value.encode()
    n = len(b)
    if n < 32:
        out.append(0xA0 | n)
    elif n < 0x100:
        out += _pack_b8(0xD9, n)
    elif n < 0x10000:
        out += _pack_b16(0xDA, n)
    else:
        out += _pack_b32(0xDB, n)
    out += b


def _pack_int(n: int, out: bytearray) -> None:
    if n >= 0:
        if n < 0x80:
            out.append(n)
        elif n < 0x100:
            out += _pack_b8(0xCC, n)
        elif n < 0x10000:
            out += _pack_b16(0xCD, n)
        elif n < 0x100000000:
            out += _pack_b32(0xCE, n)
        elif n < 0x10000000000000000:
            out += _pack_b64(0xCF, n)
        else:
            raise CodecError(f"the integer {n} does not fit in 64 bits")
    elif n >= -32:
        out.append(n & 0xFF)
    elif n >= -0x80:
        out += _pack_i8(0xD0, n)
    elif n >= -0x8000:
        out += _pack_i16(0xD1, n)
    elif n >= -0x80000000:
        out += _pack_i32(0xD2, n)
    elif n >= -0x8000000000000000:
        out += _pack_i64(0xD3, n)
    else:
        raise CodecError(f"the integer {n} does not fit in 64 bits")


_unpack_from = struct.unpack_from


def _unpack(data: bytes, i: int) -> tuple[Any, int]:
    b = data[i]
    i += 1
    if b < 0x80:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0xA0 <= b < 0xC0:
        end = i + (b & 0x1F)
        return _text(data, i, end), end
    if 0x90 <= b < 0xA0:
        return _array(data, i, b & 0x0F)
    if 0x80 <= b < 0x90:
        return _map(data, i, b & 0x0F)
    if b == 0xC0:
        return None, i
    if b == 0xC2:
        return False, i
    if b == 0xC3:
        return True, i
    if b == 0xCC:
        return data[i], i + 1
    if b == 0xCD:
        return _unpack_from(">H", data, i)[0], i + 2
    if b == 0xCE:
        return _unpack_from(">I", data, i)[0], i + 4
    if b == 0xCF:
        return _unpack_from(">Q", data, i)[0], i + 8
    if b == 0xD0:
        return _unpack_from(">b", data, i)[0], i + 1
    if b == 0xD1:
        return _unpack_from(">h", data, i)[0], i + 2
    if b == 0xD2:
        return _unpack_from(">i", data, i)[0], i + 4
    if b == 0xD3:
        return _unpack_from(">q", data, i)[0], i + 8
    if b == 0xCA:
        return _unpack_from(">f", data, i)[0], i + 4
    if b == 0xCB:
        return _unpack_from(">d", data, i)[0], i + 8
    if b in (0xD9, 0xC4):
        n = data[i]
        i += 1
    elif b in (0xDA, 0xC5):
        n = _unpack_from(">H", data, i)[0]
        i += 2
    elif b in (0xDB, 0xC6):
        n = _unpack_from(">I", data, i)[0]
        i += 4
    elif b == 0xDC:
        return _array(data, i + 2, _unpack_from(">H", data, i)[0])
    elif b == 0xDD:
        return _array(data, i + 4, _unpack_from(">I", data, i)[0])
    elif b == 0xDE:
        return _map(data, i + 2, _unpack_from(">H", data, i)[0])
    elif b == 0xDF:
        return _map(data, i + 4, _unpack_from(">I", data, i)[0])
    else:
        raise CodecError(f"MessagePack type 0x{b:02x} (an extension) has no Weir value")
    end = i + n
    if end > len(data):
        raise IndexError
    if b in (0xC4, 0xC5, 0xC6):
        return bytes(data[i:end]), end
    return _text(data, i, end), end


def _text(data: bytes, i: int, end: int) -> str:
    if end > len(data):
        raise IndexError
    try:
        return str(data[i:end], "utf-8")
    except UnicodeDecodeError as e:
        raise CodecError(f"a MessagePack string is not UTF-8: {e}") from None


def _array(data: bytes, i: int, n: int) -> tuple[list, int]:
    items = []
    append = items.append
    for _ in range(n):
        item, i = _unpack(data, i)
        append(item)
    return items, i


def _map(data: bytes, i: int, n: int) -> tuple[dict, int]:
    items = {}
    for _ in range(n):
        key, i = _unpack(data, i)
        if isinstance(key, (list, dict)):
            raise CodecError("a MessagePack map key is an array or a map")
        items[key], i = _unpack(data, i)
    return items, i
