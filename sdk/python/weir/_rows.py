"""Typed values in every codec: rows (the contract's binary layout, read and
written with one ``struct`` call per record's fixed part) and, for JSON and
MessagePack, the plain values converted to and from the declared type."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Callable, List, Optional, Tuple

from . import codec as _codec
from .codec import CodecError
from .types import SCALARS, Node

ROW = "row"

_U32 = struct.Struct("<I")
_U32X2 = struct.Struct("<II")
_json_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _width(node: Node) -> int:
    if node.kind == "optional":
        return _width(node.inner)
    scalar = SCALARS.get(node.kind)
    return scalar[1] if scalar else 8


def _slot_format(node: Node) -> str:
    """A slot's ``struct`` format: a scalar's, or a variable field's offset
    and length."""
    if node.kind == "optional":
        return _slot_format(node.inner)
    scalar = SCALARS.get(node.kind)
    return scalar[0] if scalar else "II"


class _Record:
    """A record type compiled: its fixed part as one ``struct``."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.names = [name for name, _ in node.fields]
        self.types = [t for _, t in node.fields]
        self.inner = [t.inner if t.kind == "optional" else t for t in self.types]
        self.optional = [t.kind == "optional" for t in self.types]
        self.scalar = [i.kind in SCALARS for i in self.inner]
        self.bitmap = (len(self.types) + 7) // 8
        self.struct = struct.Struct(
            "<" + "B" * self.bitmap + "".join(_slot_format(t) for t in self.types))
        self.fixed = self.struct.size
        self.cls = node.cls
        #: Every field a number, none optional: the slots are the values,
        #: read and written in one call (a bool is checked one by one).
        self.flat = all(self.scalar) and not any(self.optional) and not any(
            i.kind == "bool" for i in self.inner)


def _record(node: Node) -> _Record:
    """The record type ``node``, compiled once (kept on the node)."""
    if node.compiled is None:
        node.compiled = _Record(node)
    return node.compiled


# --- rows to values -----------------------------------------------------------


def _payload(node: Node, buf: bytes, start: int, end: int) -> Any:
    kind = node.kind
    if kind == "string":
        try:
            return buf[start:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"a string field is not UTF-8: {e}") from None
    if kind == "bytes":
        return bytes(buf[start:end])
    if kind == "json":
        try:
            return json.loads(buf[start:end])
        except ValueError as e:
            raise CodecError(f"a json field is not JSON: {e}") from None
    if kind == "record":
        return _read_record(_record(node), buf, start, end)
    if kind == "list":
        return _read_list(node.inner, buf, start, end)
    raise CodecError(f"a {kind} is no payload")


def _read_record(r: _Record, buf: bytes, start: int, end: int) -> Any:
    if end - start < r.fixed:
        raise CodecError(f"a row of {end - start} bytes, shorter than its {r.fixed} bytes of slots")
    slots = r.struct.unpack_from(buf, start)
    if r.flat:
        values = slots[r.bitmap:]
        return r.cls(*values) if r.cls is not None else dict(zip(r.names, values))
    bitmap = slots[: r.bitmap]
    j = r.bitmap
    values = []
    append = values.append
    for i, inner in enumerate(r.inner):
        scalar = r.scalar[i]
        if r.optional[i] and bitmap[i >> 3] >> (i & 7) & 1:
            append(None)
            j += 1 if scalar else 2
            continue
        if scalar:
            append(slots[j])
            j += 1
            continue
        offset, length = slots[j], slots[j + 1]
        j += 2
        s = start + offset
        if s + length > end:
            raise CodecError(f"field `{r.names[i]}`'s {length} bytes at {offset} are outside "
                             f"its row's {end - start}")
        append(_payload(inner, buf, s, s + length))
    if r.cls is not None:
        return r.cls(*values)
    return dict(zip(r.names, values))


def _read_list(element: Node, buf: bytes, start: int, end: int) -> List[Any]:
    if end - start < 4:
        raise CodecError("a list payload shorter than its count")
    (count,) = _U32.unpack_from(buf, start)
    optional = element.kind == "optional"
    inner = element.inner if optional else element
    width = _width(inner)
    slots = 4 + (count + 7) // 8
    if slots + count * width > end - start:
        raise CodecError(f"a list of {count} elements does not fit its {end - start} bytes")
    out = []
    fmt = SCALARS.get(inner.kind)
    one = struct.Struct("<" + fmt[0]) if fmt else _U32X2
    for i in range(count):
        if optional and buf[start + 4 + (i >> 3)] >> (i & 7) & 1:
            out.append(None)
            continue
        at = start + slots + i * width
        if fmt:
            out.append(one.unpack_from(buf, at)[0])
            continue
        offset, length = one.unpack_from(buf, at)
        s = start + offset
        if s + length > end:
            raise CodecError(f"a list element's {length} bytes at {offset} are outside the list")
        out.append(_payload(inner, buf, s, s + length))
    return out


def read(node: Node, data: bytes) -> Any:
    """The value of ``node`` in its value encoding ``data`` (a record's row,
    a scalar's bytes, a string's UTF-8, ...)."""
    try:
        return _read_value(node, data, 0, len(data))
    except struct.error as e:
        raise CodecError(f"a row cut short: {e}") from None


def _read_value(node: Node, buf: bytes, start: int, end: int) -> Any:
    if node.kind == "optional":
        if start == end:
            return None
        return _read_value(node.inner, buf, start + 1, end)
    scalar = SCALARS.get(node.kind)
    if scalar:
        if end - start != scalar[1]:
            raise CodecError(f"a {node.kind} of {end - start} bytes (it has {scalar[1]})")
        return struct.unpack_from("<" + scalar[0], buf, start)[0]
    return _payload(node, buf, start, end)


# --- values to rows -----------------------------------------------------------


def _field_of(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    try:
        return getattr(value, name)
    except AttributeError:
        raise CodecError(f"{type(value).__name__} has no field `{name}`") from None


def _write_payload(node: Node, value: Any) -> bytes:
    kind = node.kind
    if kind == "string":
        if not isinstance(value, str):
            raise CodecError(f"{value!r} is not a str")
        return value.encode("utf-8")
    if kind == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise CodecError(f"{value!r} is not bytes")
        return bytes(value)
    if kind == "json":
        try:
            return _json_encoder.encode(value).encode()
        except (TypeError, ValueError) as e:
            raise CodecError(f"cannot write {value!r} as JSON: {e}") from None
    if kind == "record":
        return _write_record(_record(node), value)
    if kind == "list":
        return _write_list(node.inner, value)
    raise CodecError(f"a {kind} is no payload")


def _write_record(r: _Record, value: Any) -> bytes:
    if value is None or isinstance(value, (str, bytes, int, float, list)):
        raise CodecError(f"{value!r} is not a record ({r.cls.__name__ if r.cls else 'a dict'})")
    if r.flat and not isinstance(value, dict):
        try:
            values = [getattr(value, n) for n in r.names]
            # Only ints and floats (not a bool, which struct takes as an
            # int): anything else goes field by field, which says why.
            if set(map(type, values)) <= _NUMBERS:
                return r.struct.pack(*(0,) * r.bitmap, *values)
        except (struct.error, OverflowError, AttributeError):
            pass  # the field by field path says which field is wrong
    bitmap = [0] * r.bitmap
    slots: List[Any] = []
    payloads: List[bytes] = []
    offset = r.fixed
    for i, name in enumerate(r.names):
        v = _field_of(value, name)
        scalar = r.scalar[i]
        if v is None and not (r.inner[i].kind == "json" and not r.optional[i]):
            if not r.optional[i]:
                raise CodecError(f"field `{name}` is None, but its type is not optional")
            bitmap[i >> 3] |= 1 << (i & 7)
            slots.extend((0,) if scalar else (0, 0))
            continue
        if scalar:
            slots.append(_scalar(r.inner[i].kind, v, name))
            continue
        try:
            p = _write_payload(r.inner[i], v)
        except CodecError as e:
            raise CodecError(f"field `{name}`: {e}") from None
        slots.extend((offset, len(p)))
        payloads.append(p)
        offset += len(p)
    try:
        fixed = r.struct.pack(*bitmap, *slots)
    except (struct.error, OverflowError) as e:
        raise CodecError(f"a field out of its type's range: {e}") from None
    return fixed + b"".join(payloads)


def _scalar(kind: str, v: Any, name: str) -> Any:
    if kind == "bool":
        if not isinstance(v, bool):
            raise CodecError(f"field `{name}`: {v!r} is not a bool")
    elif kind in ("f32", "f64"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CodecError(f"field `{name}`: {v!r} is not a number")
    elif isinstance(v, bool) or not isinstance(v, int):
        raise CodecError(f"field `{name}`: {v!r} is not an int")
    return v


def _write_list(element: Node, values: Any) -> bytes:
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise CodecError(f"{values!r} is not a list")
    values = list(values)
    optional = element.kind == "optional"
    inner = element.inner if optional else element
    width = _width(inner)
    count = len(values)
    bitmap = bytearray((count + 7) // 8)
    slots = 4 + len(bitmap)
    fixed = bytearray(slots + count * width)
    payloads = []
    offset = len(fixed)
    fmt = SCALARS.get(inner.kind)
    one = struct.Struct("<" + fmt[0]) if fmt else _U32X2
    for i, v in enumerate(values):
        at = slots + i * width
        if v is None and not (inner.kind == "json" and not optional):
            if not optional:
                raise CodecError(f"element {i} is None, but the list's are not optional")
            bitmap[i >> 3] |= 1 << (i & 7)
            continue
        try:
            if fmt:
                one.pack_into(fixed, at, _scalar(inner.kind, v, f"[{i}]"))
            else:
                p = _write_payload(inner, v)
                one.pack_into(fixed, at, offset, len(p))
                payloads.append(p)
                offset += len(p)
        except (struct.error, OverflowError) as e:
            raise CodecError(f"element {i} is out of its type's range: {e}") from None
    _U32.pack_into(fixed, 0, count)
    fixed[4:slots] = bitmap
    return bytes(fixed) + b"".join(payloads)


def write(node: Node, value: Any) -> bytes:
    """``value`` of ``node`` in its value encoding."""
    if node.kind == "optional":
        return b"" if value is None else b"\x01" + write(node.inner, value)
    scalar = SCALARS.get(node.kind)
    if scalar:
        try:
            return struct.pack("<" + scalar[0], _scalar(node.kind, value, "value"))
        except (struct.error, OverflowError) as e:
            raise CodecError(f"{value!r} is out of {node.kind}'s range: {e}") from None
    return _write_payload(node, value)


# --- plain values (JSON, MessagePack) and typed ones ---------------------------


def from_plain(node: Node, value: Any, codec: str) -> Any:
    """A plain decoded value as ``node``'s: records as their dataclass,
    fields by name (a missing optional one is None), whole floats as floats."""
    kind = node.kind
    if kind == "optional":
        return None if value is None else from_plain(node.inner, value, codec)
    if value is None and kind != "json":
        raise CodecError(f"null where a {kind} is needed")
    if kind == "record":
        if not isinstance(value, dict):
            raise CodecError(f"{value!r} is not a record")
        values = []
        for name, t in node.fields:
            try:
                values.append(from_plain(t, value.get(name), codec))
            except CodecError as e:
                raise CodecError(f"field `{name}`: {e}") from None
        if node.cls is not None:
            return node.cls(*values)
        return dict(zip([n for n, _ in node.fields], values))
    if kind == "list":
        if not isinstance(value, list):
            raise CodecError(f"{value!r} is not a list")
        return [from_plain(node.inner, v, codec) for v in value]
    if kind in ("f32", "f64") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "bytes" and isinstance(value, str):
        return base64.b64decode(value)
    return value


def to_plain(node: Node, value: Any, codec: str) -> Any:
    """A typed value as plain values the codec writes: a record as a dict of
    its fields in order, bytes as base64 text in JSON."""
    kind = node.kind
    if value is None:
        return None
    if kind == "optional":
        return to_plain(node.inner, value, codec)
    if kind == "record":
        return {name: to_plain(t, _field_of(value, name), codec) for name, t in node.fields}
    if kind == "list":
        return [to_plain(node.inner, v, codec) for v in value]
    if kind == "bytes" and codec == _codec.JSON:
        return base64.b64encode(bytes(value)).decode()
    return value


def reader(codec: str, node: Optional[Node]) -> Callable[[bytes], Any]:
    """How an operator reads its records: ``codec`` with its declared type."""
    if node is None:
        if codec == ROW:
            return _fails("rows reach an operator that declares no input type")
        return lambda data: _codec.decode(codec, data)
    if codec == ROW:
        return lambda data: read(node, data)
    return lambda data: from_plain(node, _codec.decode(codec, data), codec)


def writer(codec: str, node: Optional[Node]) -> Callable[[Any], bytes]:
    """How an operator writes its records: ``codec`` with its declared type."""
    if node is None:
        if codec == ROW:
            return _fails("rows are asked of an operator that declares no output type")
        return lambda value: _codec.encode(codec, value)
    if codec == ROW:
        return lambda value: write(node, value)
    return lambda value: _codec.encode(codec, to_plain(node, value, codec))


def columns(codec: str, node: Node, values: List[bytes],
            read: Callable[[bytes], Any]) -> dict:
    """The records ``values`` of the record type ``node`` as columns: a list
    per field, in the field order."""
    names = [name for name, _ in node.fields]
    if codec == ROW and _record(node).flat:
        r = _record(node)
        unpack = r.struct.unpack_from
        try:
            rows = [unpack(v) for v in values]
        except struct.error as e:
            raise CodecError(f"a row cut short: {e}") from None
        cols = list(zip(*rows)) if rows else [() for _ in range(r.bitmap + len(names))]
        return {name: list(col) for name, col in zip(names, cols[r.bitmap:])}
    records = [read(v) for v in values]
    return {name: [_field_of(rec, name) for rec in records] for name in names}


def rows_of(codec: str, node: Node, cols: Any, n: int,
            write: Callable[[Any], bytes]) -> List[bytes]:
    """Columns of ``n`` values each, for every field of ``node``, as
    records."""
    if not isinstance(cols, dict):
        raise CodecError(f"a vectorized function returned {type(cols).__name__}: a dict of columns "
                         "is needed")
    names = [name for name, _ in node.fields]
    lists = []
    for name in names:
        col = cols.get(name)
        if col is None:
            raise CodecError(f"the returned columns have no `{name}`")
        if isinstance(col, (str, bytes, dict)) or not hasattr(col, "__iter__"):
            raise CodecError(f"column `{name}` is a {type(col).__name__}, not a list of values")
        col = list(col)
        if len(col) != n:
            raise CodecError(f"column `{name}` has {len(col)} values for {n} records")
        lists.append(col)
    extra = [k for k in cols if k not in names and k != KEEP]
    if extra:
        raise CodecError(f"the returned columns have {', '.join(map(str, extra))}, which "
                         "the output type has not")
    if not names:
        return [write({}) for _ in range(n)]
    if codec == ROW and _record(node).flat and all(set(map(type, c)) <= _NUMBERS for c in lists):
        r = _record(node)
        pack = r.struct.pack
        zeros = (0,) * r.bitmap
        try:
            return [pack(*zeros, *row) for row in zip(*lists)]
        except (struct.error, OverflowError):
            pass  # the field by field path says which value is wrong
    return [write(dict(zip(names, row))) for row in zip(*lists)]


#: What the one-call path writes as it is: a bool (an int to struct) or any
#: other number type goes field by field, which checks it.
_NUMBERS = {int, float}


#: The column of a vectorized function's output that says which rows to
#: keep (``True``) and which to drop.
KEEP = "__weir_keep__"


def _fails(message: str) -> Callable[[Any], Any]:
    def fail(_: Any) -> Any:
        raise CodecError(message)

    return fail


def key_codec(codec: str) -> str:
    """The codec of a stream's keys: a row stream's are MessagePack."""
    return _codec.MSGPACK if codec == ROW else codec


__all__: Tuple[str, ...] = ("read", "write", "reader", "writer", "from_plain", "to_plain",
                            "key_codec", "ROW")
