"""Operators: the decorators that register them by name, the base classes
of the stateful ones, and how each kind handles records."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional

from . import codec as _plain
from . import types as _types
from ._context import Context, OpenContext, Pending, TimeDomain, Window


class KeyedProcess:
    """A stateful operator on a keyed stream, like Flink's
    ``KeyedProcessFunction``: it sees one record at a time with its key,
    keeps keyed state (declared in :meth:`open`) and registers timers.

    :meth:`process` and :meth:`on_timer` emit with ``ctx.emit`` or by
    returning (or yielding) their outputs.
    """

    def open(self, ctx: OpenContext) -> None:
        """Set up one subtask: read parameters, declare state."""

    def process(self, value: Any, ctx: Context) -> Optional[Iterable[Any]]:
        """Handle one record; its key is the current key."""
        raise NotImplementedError

    def on_timer(self, time: int, domain: TimeDomain, ctx: Context) -> Optional[Iterable[Any]]:
        """Handle a timer of the current key that fired. By default, nothing."""
        return None


class Process:
    """A stateless operator that needs set-up (parameters) or side outputs;
    emits any number of outputs per record."""

    def open(self, ctx: OpenContext) -> None:
        """Set up one subtask."""

    def process(self, value: Any, ctx: Context) -> Optional[Iterable[Any]]:
        """Handle one record."""
        raise NotImplementedError


class Aggregate:
    """A window aggregate, like Flink's ``AggregateFunction``: the runtime
    keeps one accumulator per key and window (per pane, for sliding
    windows), folds records into it with :meth:`add`, merges accumulators
    with :meth:`merge` (panes of a sliding window, sessions that meet) and
    asks for :meth:`get_result` when the window fires. Accumulators are any
    value the codec can say; they are stored in keyed state.
    """

    def open(self, ctx: OpenContext) -> None:
        """Set up one subtask."""

    def create_accumulator(self) -> Any:
        """A new, empty accumulator."""
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        """``accumulator`` with ``value`` added (may change it in place and
        return it)."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """The accumulator of ``a``'s and ``b``'s records together."""
        raise NotImplementedError

    def get_result(self, accumulator: Any, window: Window) -> Any:
        """The window's result, emitted with the timestamp ``window.end - 1``."""
        raise NotImplementedError


class ProcessWindow:
    """A process-window function, like Flink's ``ProcessWindowFunction``: the
    runtime keeps all of a window's records and hands them over when it
    fires."""

    def open(self, ctx: OpenContext) -> None:
        """Set up one subtask."""

    def process(self, window: Window, elements: List[Any]) -> Optional[Iterable[Any]]:
        """The window's results (returned or yielded), emitted with the
        timestamp ``window.end - 1``."""
        raise NotImplementedError


class Entry:
    """A registered operator: its name, kind (the contract's) and how to
    make one for a subtask."""

    def __init__(self, name: str, kind: str, make: Callable[[OpenContext], "Handler"],
                 target: Any, input: Any = None, output: Any = None) -> None:
        self.name = name
        #: The decorated function or class.
        self.target = target
        self.kind = kind
        self.make = make
        #: Whether it takes a batch's columns (:func:`vectorized_map`).
        self.vectorized = False
        #: The types it declares (:class:`weir.types.Node`), or ``None``.
        self.input_type = _declared(name, "input", input)
        self.output_type = _declared(name, "output", output)
        if self.passes_through and self.output_type is not None:
            raise TypeError(f"operator `{name}` passes its records on: it declares no output type")

    @property
    def passes_through(self) -> bool:
        """Whether it writes the records it reads (a filter, a timestamp
        assigner): what it writes has its input's type."""
        return self.kind in ("filter", "timestamp-assigner")

    @property
    def writes(self) -> Any:
        """The type of what it writes."""
        return self.input_type if self.passes_through else self.output_type

    @property
    def keyed(self) -> bool:
        """Whether it keeps keyed state (a keyed process)."""
        return self.kind == "keyed-process"

    @property
    def window(self) -> bool:
        """Whether it is a window function."""
        return self.kind in ("window", "window-process")


def _declared(name: str, what: str, py: Any) -> Any:
    if py is None:
        return None
    try:
        return _types.type_of(py)
    except TypeError as e:
        raise TypeError(f"operator `{name}`: its {what} type: {e}") from None


#: The operators of this component, by name, in registration order.
REGISTRY: Dict[str, Entry] = {}


def _register(entry: Entry) -> None:
    if entry.name in REGISTRY:
        raise ValueError(f"two operators are named `{entry.name}`")
    REGISTRY[entry.name] = entry


def _emit_all(outputs: Optional[Iterable[Any]], pending: Pending) -> None:
    if outputs is None:
        return
    if isinstance(outputs, (str, bytes, dict)):
        raise TypeError(
            f"an operator returned a {type(outputs).__name__}: return (or yield) "
            "an iterable of outputs, or None"
        )
    push = pending.push
    for out in outputs:
        push(out)


class Handler:
    """How one kind of operator handles records, timers and windows."""

    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        raise TypeError("a window function is called by the window operator, not per record")

    def timer(self, time: int, domain: TimeDomain, ctx: Context) -> None:
        pass

    def accumulate(self, records: List[bytes], accumulators: List[bytes], groups: List[int],
                   targets: List[int], read: Callable[[bytes], Any], state: str) -> List[bytes]:
        raise TypeError("this operator is not a window aggregate")

    def fire(self, window: Window, contents: List[bytes], pending: Pending, ctx: Context) -> None:
        raise TypeError("this operator is not a window function")


class _Map(Handler):
    def __init__(self, f: Callable[[Any], Any]) -> None:
        self.f = f

    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        pending.push(self.f(pending.codecs.read(value)))


class _FlatMap(_Map):
    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        _emit_all(self.f(pending.codecs.read(value)), pending)


class _Filter(_Map):
    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        c = pending.codecs
        if self.f(c.read(value)):
            pending.push_encoded(c.transcode(value), None, pending.timestamp)


class _Timestamps(_Map):
    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        t = self.f(pending.codecs.read(value))
        if not isinstance(t, int) or isinstance(t, bool):
            raise TypeError(f"a timestamp assigner returned {t!r}: an int of ms is needed")
        if not -(2**63) < t < 2**63:
            raise ValueError(f"the timestamp {t} is outside the 64-bit range")
        pending.push_encoded(pending.codecs.transcode(value), None, t)


class _Process(Handler):
    def __init__(self, op: Any) -> None:
        self.op = op

    def record(self, value: bytes, pending: Pending, ctx: Context) -> None:
        _emit_all(self.op.process(pending.codecs.read(value), ctx), pending)

    def timer(self, time: int, domain: TimeDomain, ctx: Context) -> None:
        _emit_all(self.op.on_timer(time, domain, ctx), ctx._pending)


class _Aggregate(Handler):
    def __init__(self, op: Aggregate) -> None:
        self.op = op

    def merged(self, stored: List[bytes], codec: str) -> Any:
        if not stored:
            return self.op.create_accumulator()
        acc = _plain.decode(codec, stored[0])
        for other in stored[1:]:
            acc = self.op.merge(acc, _plain.decode(codec, other))
        return acc

    def accumulate(self, records: List[bytes], accumulators: List[bytes], groups: List[int],
                   targets: List[int], read: Callable[[bytes], Any], state: str) -> List[bytes]:
        accs = []
        start = 0
        for end in groups:
            if end < start or end > len(accumulators):
                raise ValueError("a group's accumulators are outside the call's")
            accs.append(self.merged(accumulators[start:end], state))
            start = end
        add = self.op.add
        for record, g in zip(records, targets):
            if g >= len(accs):
                raise ValueError("a record's group is outside the call's")
            accs[g] = add(read(record), accs[g])
        return [_plain.encode(state, acc) for acc in accs]

    def fire(self, window: Window, contents: List[bytes], pending: Pending, ctx: Context) -> None:
        acc = self.merged(contents, pending.codecs.state)
        pending.push(self.op.get_result(acc, window))


class _ProcessWindow(Handler):
    def __init__(self, op: ProcessWindow) -> None:
        self.op = op

    def fire(self, window: Window, contents: List[bytes], pending: Pending, ctx: Context) -> None:
        read = pending.codecs.read
        elements = [read(c) for c in contents]
        _emit_all(self.op.process(window, elements), pending)


class _Vectorized(Handler):
    """A vectorized map: the batch's records as columns in, columns out."""

    def __init__(self, f: Callable[[Any], Any]) -> None:
        self.f = f


def _named(kind: str, name: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"@weir.{kind} needs the operator's name, as the manifest's `function` says it")
    return name


def _function(kind: str, contract: str, handler: type) -> Callable[..., Callable]:
    def decorator(name: str, *, input: Any = None, output: Any = None) -> Callable:
        _named(kind, name)

        def register(f: Callable) -> Callable:
            if not callable(f) or isinstance(f, type):
                raise TypeError(f"@weir.{kind}({name!r}) decorates a function")
            _register(Entry(name, contract, lambda ctx: handler(f), f, input, output))
            return f

        return register

    decorator.__name__ = kind
    return decorator


def _class(kind: str, contract: str, base: type, handler: type) -> Callable[..., Callable]:
    def decorator(name: str, *, input: Any = None, output: Any = None) -> Callable:
        _named(kind, name)

        def register(cls: type) -> type:
            if not isinstance(cls, type) or not issubclass(cls, base):
                raise TypeError(f"@weir.{kind}({name!r}) decorates a subclass of weir.{base.__name__}")

            def make(ctx: OpenContext) -> Handler:
                if contract in ("window", "window-process") and ctx.window is None:
                    raise ValueError(
                        "this is a window function, but the job gives it no `window` in its manifest"
                    )
                op = cls()
                op.open(ctx)
                return handler(op)

            _register(Entry(name, contract, make, cls, input, output))
            return cls

        return register

    decorator.__name__ = kind
    return decorator


def vectorized_map(name: str, *, input: Any, output: Any) -> Callable:
    """Register a vectorized map, like PyFlink's pandas scalar functions:
    ``f(columns)`` gets a batch's records as columns (a dict of lists, one
    per field of ``input``, a record type) and returns the output's columns
    (a dict of lists of the same length, one per field of ``output``); row
    ``i`` of the output is record ``i``'s result, with its timestamp. A
    column ``weir.KEEP`` of booleans, when returned, drops the rows that are
    false (a filter in the same pass)."""
    _named("vectorized_map", name)

    def register(f: Callable) -> Callable:
        if not callable(f) or isinstance(f, type):
            raise TypeError(f"@weir.vectorized_map({name!r}) decorates a function")
        entry = Entry(name, "flat-map", lambda ctx: _Vectorized(f), f, input, output)
        for what, t in (("input", entry.input_type), ("output", entry.output_type)):
            if t is None or t.kind != "record":
                raise TypeError(f"operator `{name}`: a vectorized map's {what} is a record type")
        entry.vectorized = True
        _register(entry)
        return f

    return register


map = _function("map", "map", _Map)
flat_map = _function("flat_map", "flat-map", _FlatMap)
filter = _function("filter", "filter", _Filter)
timestamps = _function("timestamps", "timestamp-assigner", _Timestamps)
process = _class("process", "flat-map", Process, _Process)
keyed_process = _class("keyed_process", "keyed-process", KeyedProcess, _Process)
window_aggregate = _class("window_aggregate", "window", Aggregate, _Aggregate)
window_process = _class("window_process", "window-process", ProcessWindow, _ProcessWindow)
