"""Record types: what an operator declares it reads and writes.

An operator declares its types in its decorator, as Python types::

    from dataclasses import dataclass
    from typing import Optional
    import weir
    from weir.types import U32, U64

    @dataclass
    class Event:
        id: U64
        k: U32
        price: U64
        ts: int

    @dataclass
    class Priced:
        id: U64
        dollars: float
        note: Optional[str] = None

    @weir.map("price", input=Event, output=Priced)
    def price(e: Event) -> Priced:
        return Priced(e.id, 0.908 * e.price)

The job is then checked when it is submitted (an upstream that writes
something else is refused, naming both operators and the field), records
reach the operator as instances of its input type, and what it returns is
written as its output type: as rows when its neighbours read and write
exactly that type, else as JSON or MessagePack, read by field name.

Python types map to Weir's (see the docs' record types):

==============================  ==========================================
Python                          Weir
==============================  ==========================================
``bool``                        ``bool``
``int``                         ``i64`` (``U8``…``U64``, ``I8``…``I32``: other widths)
``float``                       ``f64`` (``F32``: single precision)
``str``                         ``string``
``bytes``                       ``bytes``
``Optional[T]``                 ``T?``
``List[T]`` / ``list[T]``       ``list<T>``
a dataclass                     a record, its fields in order
``dict``, ``Any``               ``json`` (any value)
==============================  ==========================================

>>> from dataclasses import dataclass
>>> @dataclass
... class Point:
...     x: I32
...     label: Optional[str]
>>> text(type_of(Point))
'{x: i32, label: string?}'
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any, List, Optional, Tuple

__all__ = [
    "I8", "I16", "I32", "U8", "U16", "U32", "U64", "F32", "Node", "type_of", "text",
]

#: Integers of other widths than ``int`` (``i64``), and single-precision
#: floats: ``typing.Annotated`` with the Weir type's name.
I8 = typing.Annotated[int, "i8"]
I16 = typing.Annotated[int, "i16"]
I32 = typing.Annotated[int, "i32"]
U8 = typing.Annotated[int, "u8"]
U16 = typing.Annotated[int, "u16"]
U32 = typing.Annotated[int, "u32"]
U64 = typing.Annotated[int, "u64"]
F32 = typing.Annotated[float, "f32"]

#: Fixed-width types: their ``struct`` format (little-endian) and width.
SCALARS = {
    "bool": ("?", 1), "i8": ("b", 1), "i16": ("h", 2), "i32": ("i", 4), "i64": ("q", 8),
    "u8": ("B", 1), "u16": ("H", 2), "u32": ("I", 4), "u64": ("Q", 8),
    "f32": ("f", 4), "f64": ("d", 8),
}


class Node:
    """A Weir type, as the SDK reads and writes it: ``kind`` is a scalar's
    name, ``"string"``, ``"bytes"``, ``"json"``, ``"optional"``, ``"list"``
    or ``"record"``; ``inner`` an optional's or a list's element type;
    ``fields`` a record's (name, type) pairs and ``cls`` the dataclass its
    values are (``None``: dicts)."""

    __slots__ = ("kind", "inner", "fields", "cls", "compiled")

    def __init__(self, kind: str, inner: Optional["Node"] = None,
                 fields: Optional[List[Tuple[str, "Node"]]] = None, cls: Any = None) -> None:
        self.kind = kind
        self.inner = inner
        self.fields = fields or []
        self.cls = cls
        #: The SDK's reader and writer of its rows, made on first use.
        self.compiled: Any = None

    def __repr__(self) -> str:
        return f"Node({text(self)})"


def type_of(py: Any) -> Node:
    """The Weir type of a Python type (a dataclass, ``int``, ``Optional[str]``,
    ...); a ``TypeError`` names what has none."""
    return _type_of(py, [])


def _type_of(py: Any, seen: List[Any]) -> Node:
    if py is bool:
        return Node("bool")
    if py is int:
        return Node("i64")
    if py is float:
        return Node("f64")
    if py is str:
        return Node("string")
    if py is bytes:
        return Node("bytes")
    if py is dict or py is Any or py is object:
        return Node("json")
    origin = typing.get_origin(py)
    args = typing.get_args(py)
    if origin is typing.Annotated:
        base, names = args[0], [a for a in args[1:] if isinstance(a, str) and a in SCALARS]
        if not names:
            return _type_of(base, seen)
        name = names[0]
        expected = bool if name == "bool" else float if name.startswith("f") else int
        if base is not expected:
            raise TypeError(f"{name} annotates {expected.__name__}, not {base!r}")
        return Node(name)
    if origin is typing.Union or _is_union_type(py):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            raise TypeError(f"{py!r}: a union other than Optional[T] has no Weir type")
        inner = _type_of(rest[0], seen)
        if inner.kind == "optional":
            raise TypeError(f"{py!r}: an optional of an optional has no Weir type")
        return Node("optional", inner)
    if origin in (list, List):
        if len(args) != 1:
            raise TypeError(f"{py!r}: a list needs its element type (List[int])")
        return Node("list", _type_of(args[0], seen))
    if origin is dict:
        return Node("json")
    if isinstance(py, type) and dataclasses.is_dataclass(py):
        if py in seen:
            raise TypeError(f"{py.__name__} contains itself: a record type cannot")
        hints = typing.get_type_hints(py, include_extras=True)
        fields = []
        for f in dataclasses.fields(py):
            if not f.init:
                raise TypeError(f"{py.__name__}.{f.name} is not set by the constructor (init=False)")
            try:
                fields.append((f.name, _type_of(hints[f.name], seen + [py])))
            except TypeError as e:
                raise TypeError(f"{py.__name__}.{f.name}: {e}") from None
        return Node("record", fields=fields, cls=py)
    raise TypeError(f"{py!r} has no Weir type (a dataclass, bool, int, float, str, bytes, "
                    "Optional[...], List[...] or dict)")


def _is_union_type(py: Any) -> bool:
    union = getattr(__import__("types"), "UnionType", None)
    return union is not None and isinstance(py, union)


def text(node: Node) -> str:
    """The type in Weir's type syntax (``{id: u64, name: string?}``)."""
    if node.kind == "optional":
        return text(node.inner) + "?"
    if node.kind == "list":
        return f"list<{text(node.inner)}>"
    if node.kind == "record":
        return "{" + ", ".join(f"{_name(name)}: {text(t)}" for name, t in node.fields) + "}"
    return node.kind


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _name(name: str) -> str:
    """A field name as the syntax writes it: quoted unless an identifier."""
    return name if _IDENTIFIER.match(name) else json.dumps(name)
