"""Weir operators in Python.

Write the functions of a Weir streaming job in Python; ``weir build`` turns
the module into a WebAssembly component (with componentize-py) that Weir's
workers run in a sandbox, beside operators written in Rust or JavaScript.

Operators are registered by name, the name a job manifest's ``function``
uses, with a decorator per kind:

=========================  ==========================================  ===========================
decorator                  decorates                                   called
=========================  ==========================================  ===========================
``@weir.map``              ``f(value) -> out``                         once per record, one output
``@weir.flat_map``         ``f(value) -> iterable``                    once per record, any outputs
``@weir.filter``           ``f(value) -> bool``                        keeps the records it is true for
``@weir.timestamps``       ``f(value) -> int``                         a source's timestamp assigner (ms)
``@weir.process``          a :class:`Process` subclass                 stateless, with parameters
``@weir.keyed_process``    a :class:`KeyedProcess` subclass            keyed state and timers
``@weir.window_aggregate`` an :class:`Aggregate` subclass              per window, incrementally
``@weir.window_process``   a :class:`ProcessWindow` subclass           per window, all its records
=========================  ==========================================  ===========================

Records are plain Python values (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, ``list``, ``dict``; see :mod:`weir.codec`): a record read
from a text file is a ``str``, a JSON-lines record a ``dict``; a tuple is
written as a list. An operator that declares its types
(``@weir.map("f", input=Event, output=Out)`` with dataclasses, see
:mod:`weir.types`) gets and returns instances of them instead, checked
against its neighbours' when the job is submitted and read from rows. Values cross the boundary in the same encodings as the
Rust SDK's, so records and state written in one language read in another.

The state of a keyed process (:class:`ValueState`, :class:`ListState`,
:class:`MapState`) is served from a cache inside the component: the value
states of a whole batch's keys are fetched in one host call and the batch's
changes handed back in one call each.

:mod:`weir.testing` runs an operator under plain ``pytest``.

>>> import re, weir
>>> @weir.flat_map("split-words")
... def split(line):
...     return (w.lower() for w in re.findall(r"\\w+", line))
>>> @weir.keyed_process("count")
... class Count(weir.KeyedProcess):
...     def open(self, ctx):
...         self.count = ctx.value_state("count")
...     def process(self, word, ctx):
...         n = (self.count.value() or 0) + 1
...         self.count.update(n)
...         yield [word, n]
>>> from weir.testing import Harness
>>> Harness("split-words").process("To be, or not to be")
['to', 'be', 'or', 'not', 'to', 'be']
>>> h = Harness("count")
>>> h.process("be", key="be"), h.process("be", key="be")
([['be', 1]], [['be', 2]])
"""

from __future__ import annotations

import sys

from . import codec, types
from ._context import Context, OpenContext, TimeDomain, Window, WindowSpec
from ._driver import OperatorError
from ._operators import (
    Aggregate,
    KeyedProcess,
    Process,
    ProcessWindow,
    filter,
    flat_map,
    keyed_process,
    map,
    process,
    timestamps,
    vectorized_map,
    window_aggregate,
    window_process,
)
from ._rows import KEEP
from ._state import ListState, MapState, ValueState

__all__ = [
    "KEEP",
    "Aggregate",
    "Context",
    "KeyedProcess",
    "ListState",
    "MapState",
    "OpenContext",
    "OperatorError",
    "Process",
    "ProcessWindow",
    "TimeDomain",
    "ValueState",
    "Window",
    "WindowSpec",
    "codec",
    "filter",
    "flat_map",
    "keyed_process",
    "log",
    "map",
    "process",
    "timestamps",
    "types",
    "vectorized_map",
    "window_aggregate",
    "window_process",
]

_LEVELS = ("debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Write a line to the task's log (the worker's log, tagged with the job,
    operator and subtask): ``level`` is ``"debug"``, ``"info"``, ``"warn"``
    or ``"error"``. Outside a component the line goes to stderr."""
    if level not in _LEVELS:
        raise ValueError(f"log level {level!r}: expected one of {', '.join(_LEVELS)}")
    component = sys.modules.get("weir._component")
    if component is not None:
        component.HOST.log(level, str(message))
    else:
        print(f"[{level}] {message}", file=sys.stderr)
