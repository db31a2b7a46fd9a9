"""Run an operator natively, under plain ``pytest``, without WebAssembly.

:class:`Harness` creates an operator registered with the decorators, hands
it records (with key and timestamp), moves the watermark and the processing
time, and returns what it emitted. State, timers and windows live in memory;
the operator runs through the same code as in the component (the same state
cache, the same codecs), so what passes here behaves the same on a cluster.

>>> import weir
>>> @weir.map("double")
... def double(n):
...     return n * 2
>>> Harness("double").process(21)
[42]
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _rows
from . import codec as _codec
from ._batch import OutBatch, unpack
from ._context import Codecs, TimeDomain, WindowSpec
from ._driver import Instance, OperatorError
from ._operators import REGISTRY

__all__ = ["Harness", "tumbling", "sliding", "session", "OperatorError"]


def tumbling(size_ms: int, allowed_lateness_ms: int = 0, processing_time: bool = False) -> WindowSpec:
    """Tumbling windows ``[k·size, (k + 1)·size)``."""
    return WindowSpec("tumbling", size_ms, None, None, _domain(processing_time), allowed_lateness_ms)


def sliding(size_ms: int, slide_ms: int, allowed_lateness_ms: int = 0,
            processing_time: bool = False) -> WindowSpec:
    """Sliding windows ``[k·slide, k·slide + size)``."""
    return WindowSpec("sliding", size_ms, slide_ms, None, _domain(processing_time),
                      allowed_lateness_ms)


def session(gap_ms: int, allowed_lateness_ms: int = 0, processing_time: bool = False) -> WindowSpec:
    """Session windows: ``[t, t + gap)`` per record, merged while they meet."""
    return WindowSpec("session", None, None, gap_ms, _domain(processing_time), allowed_lateness_ms)


def _domain(processing_time: bool) -> TimeDomain:
    return TimeDomain.PROCESSING_TIME if processing_time else TimeDomain.EVENT_TIME


class _MemoryHost:
    """Keyed state and timers in memory; a call's effects are staged and
    applied only when it succeeds, as on a worker."""

    def __init__(self) -> None:
        self.declared: List[Tuple[str, str]] = []
        self.values: Dict[Tuple[int, bytes], bytes] = {}
        self.lists: Dict[Tuple[int, bytes], List[bytes]] = {}
        self.maps: Dict[Tuple[int, bytes], Dict[bytes, bytes]] = {}
        self.timers: set = set()
        self.staged: List[Tuple[str, Any]] = []
        # States declared with a time-to-live: their values are kept
        # stamped with their expiry time, as the runtime keeps them.
        self.ttls: Dict[int, Tuple[int, bool]] = {}
        self.now = 0

    def declare_state_ttl(self, name: str, kind: str, ttl_ms: int, refresh_on_read: bool) -> int:
        state = self.declare_state(name, kind)
        self.ttls[state] = (ttl_ms, refresh_on_read)
        return state

    def declare_typed_state(self, name: str, kind: str, ttl: Optional[Tuple[int, bool]],
                            value_type: str) -> int:
        # The harness keeps the rows as the operator writes them.
        if ttl is None:
            return self.declare_state(name, kind)
        return self.declare_state_ttl(name, kind, ttl[0], ttl[1])

    def _stamp(self, state: int, value: bytes) -> bytes:
        ttl = self.ttls.get(state)
        return value if ttl is None else struct.pack(">q", self.now + ttl[0]) + bytes(value)

    def _restamp(self, state: int, addr: Tuple[int, bytes], values: List[bytes]) -> List[bytes]:
        """A list replaced by ``values``, as stored: an element the stored
        list holds, alive, keeps its expiry time (as the runtime keeps it);
        the others are stamped now (all, when reads renew)."""
        ttl = self.ttls.get(state)
        if ttl is None:
            return list(values)
        kept: Dict[bytes, List[bytes]] = {}
        if not ttl[1]:
            for old in self.lists.get(addr, []):
                if struct.unpack(">q", old[:8])[0] > self.now:
                    kept.setdefault(bytes(old[8:]), []).append(old)
        out = []
        for v in values:
            same = kept.get(bytes(v))
            out.append(same.pop(0) if same else self._stamp(state, v))
        return out

    def _read(self, state: int, stored: Optional[bytes]) -> Tuple[Optional[bytes], Optional[bytes]]:
        """A stored value as read, and what stays stored (``None``: it expired)."""
        ttl = self.ttls.get(state)
        if ttl is None or stored is None:
            return stored, stored
        if struct.unpack(">q", stored[:8])[0] <= self.now:
            return None, None
        if ttl[1]:
            stored = struct.pack(">q", self.now + ttl[0]) + stored[8:]
        return stored[8:], stored

    def declare_state(self, name: str, kind: str) -> int:
        for i, (n, k) in enumerate(self.declared):
            if n == name:
                if k != kind:
                    raise ValueError(f"state `{name}` is already declared with another kind")
                return i
        self.declared.append((name, kind))
        return len(self.declared) - 1

    def get_values(self, states: List[int], keys: List[bytes]) -> List[Optional[bytes]]:
        out = []
        for k in keys:
            for s in states:
                value, kept = self._read(s, self.values.get((s, k)))
                if kept is None:
                    self.values.pop((s, k), None)
                else:
                    self.values[(s, k)] = kept
                out.append(value)
        return out

    def get_list(self, state: int, key: bytes) -> List[bytes]:
        read = [self._read(state, v) for v in self.lists.get((state, key), [])]
        if state in self.ttls and (state, key) in self.lists:
            self.lists[(state, key)] = [kept for _, kept in read if kept is not None]
        return [value for value, _ in read if value is not None]

    def get_entry(self, state: int, key: bytes, map_key: bytes) -> Optional[bytes]:
        entries = self.maps.get((state, key), {})
        value, kept = self._read(state, entries.get(map_key))
        if kept is None:
            entries.pop(map_key, None)
        else:
            entries[map_key] = kept
        return value

    def get_entries(self, state: int, key: bytes) -> List[Tuple[bytes, bytes]]:
        entries = self.maps.get((state, key), {})
        return [(k, v) for k in sorted(entries)
                if (v := self.get_entry(state, key, k)) is not None]

    def emit(self, batch: OutBatch) -> None:
        self.staged.append(("emit", batch.records()))

    def emit_side(self, name: str, batch: OutBatch) -> None:
        self.staged.append(("side", (name, batch.records())))

    def put_values(self, state: int, keys: Any, values: Any) -> None:
        self.staged.append(("puts", (state, keys, values)))

    def update_state(self, ops: List[tuple]) -> None:
        self.staged.append(("state", ops))

    def update_timers(self, ops: List[tuple]) -> None:
        self.staged.append(("timers", ops))

    def log(self, level: str, message: str) -> None:
        print(f"[{level}] {message}", file=sys.stderr)

    def commit(self) -> Tuple[list, Dict[str, list]]:
        """Apply the staged effects; the main and side outputs' records."""
        main: list = []
        side: Dict[str, list] = {}
        for what, arg in self.staged:
            if what == "emit":
                main.extend(arg)
            elif what == "side":
                side.setdefault(arg[0], []).extend(arg[1])
            elif what == "puts":
                state, keys, values = arg
                for k, v in zip(unpack(*keys), unpack(*values)):
                    self.values[(state, k)] = self._stamp(state, v)
            elif what == "state":
                for op in arg:
                    addr = (op[1], op[2])
                    if op[0] == "clear":
                        self.values.pop(addr, None)
                        self.lists.pop(addr, None)
                        self.maps.pop(addr, None)
                    elif op[0] == "append-list":
                        self.lists.setdefault(addr, []).extend(
                            self._stamp(op[1], v) for v in op[3])
                    elif op[0] == "replace-list":
                        self.lists[addr] = self._restamp(op[1], addr, op[3])
                    elif op[0] == "put-entry":
                        self.maps.setdefault(addr, {})[op[3]] = self._stamp(op[1], op[4])
                    else:
                        self.maps.get(addr, {}).pop(op[3], None)
            else:
                for register, key, time, domain in arg:
                    if register:
                        self.timers.add((time, domain.value, key))
                    else:
                        self.timers.discard((time, domain.value, key))
        self.staged = []
        return main, side


class _Windows:
    """The window operator of the runtime, for one harness: assigns records
    to windows, keeps their accumulators (or records), fires them."""

    def __init__(self, spec: WindowSpec, aggregate: bool) -> None:
        self.spec = spec
        self.aggregate = aggregate
        # (key, start, end) -> accumulator bytes (aggregate) or record list
        self.windows: Dict[Tuple[bytes, int, int], Any] = {}
        self.fired: set = set()

    def assign(self, t: int) -> List[Tuple[int, int]]:
        s = self.spec
        if s.kind == "tumbling":
            start = t - t % s.size_ms
            return [(start, start + s.size_ms)]
        if s.kind == "sliding":
            last = t - t % s.slide_ms
            out = []
            start = last
            while start > t - s.size_ms:
                out.append((start, start + s.size_ms))
                start -= s.slide_ms
            return sorted(out)
        return [(t, t + s.gap_ms)]

    def late(self, end: int, watermark: Optional[int]) -> bool:
        return (self.spec.domain is TimeDomain.EVENT_TIME and watermark is not None
                and end - 1 + self.spec.allowed_lateness_ms <= watermark)


class Harness:
    """Runs one registered operator (by its name, or the decorated function
    or class) with in-memory state, timers and windows.

    ``params`` are the job's parameters; ``window`` a window function's
    windows (:func:`tumbling`, :func:`sliding`, :func:`session`); with
    ``msgpack=True`` records and state are MessagePack, as between
    components on a cluster (JSON otherwise); with ``rows=True`` an operator
    that declares types (:mod:`weir.types`) reads and writes rows, as beside
    operators and sources of the same types (state and untyped sides are
    MessagePack). Records handed in and handed back are values of the
    declared types (dataclass instances)."""

    def __init__(self, operator: Union[str, Any], params: Optional[Dict[str, str]] = None,
                 window: Optional[WindowSpec] = None, msgpack: bool = False,
                 rows: bool = False) -> None:
        name = operator if isinstance(operator, str) else _name_of(operator)
        entry = REGISTRY.get(name)
        if entry is None:
            raise OperatorError(f"no operator named `{name}` (registered: {', '.join(REGISTRY)})")
        codec = _codec.MSGPACK if msgpack or rows else _codec.JSON
        into = _rows.ROW if rows and entry.input_type is not None else codec
        out = _rows.ROW if rows and entry.writes is not None else codec
        self.codecs = Codecs(into, out, {}, codec)
        self._input_type = entry.input_type
        self._encode = _rows.writer(into, entry.input_type)
        self._decode = _rows.reader(out, entry.writes)
        self._host = _MemoryHost()
        self._keyed = entry.keyed or entry.window
        self._windows = _Windows(window, entry.kind == "window") if window is not None else None
        config = [(k, str(v)) for k, v in (params or {}).items()]
        self._instance = Instance(name, config, window, self.codecs, self._host)
        #: The task's watermark (``None`` before the first).
        self.watermark: Optional[int] = None
        #: The worker's processing time, ms.
        self.processing_time = 0
        self._side: Dict[str, list] = {}
        self._timestamps: List[Optional[int]] = []

    def _outputs(self) -> list:
        main, side = self._host.commit()
        for name, recs in side.items():
            self._side.setdefault(name, []).extend(recs)
        self._timestamps = [r[2] for r in main]
        return [self._decode(r[1]) for r in main]

    def _call(self, f: Any, *args: Any) -> list:
        try:
            f(*args)
        except BaseException:
            self._host.staged = []
            raise
        return self._outputs()

    def process(self, value: Any, key: Any = None, timestamp: Optional[int] = None) -> list:
        """Hand the operator one record; what it emitted (for a window
        function, the windows that fired again at once)."""
        k = _codec.encode(self.codecs.input_keys, key) if self._keyed else None
        v = self._encode(value)
        if self._windows is not None:
            return self._window_record(k, v, timestamp)
        batch = OutBatch()
        batch.push(k, v, timestamp)
        return self._call(self._instance.process, bytes(batch.data), batch.spans,
                          batch.timestamps, self.watermark, self.processing_time)

    def process_batch(self, values: List[Any], timestamps: Optional[List[Optional[int]]] = None
                      ) -> list:
        """Hand the operator records in one batch (a vectorized map sees them
        as one batch's columns); what it emitted. For operators that take
        records without a key or a window."""
        if self._keyed or self._windows is not None:
            raise OperatorError("process_batch is for operators without keys or windows: "
                                "use process")
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(f"{len(timestamps)} timestamps for {len(values)} records")
        batch = OutBatch()
        for i, value in enumerate(values):
            batch.push(None, self._encode(value), timestamps[i] if timestamps else None)
        return self._call(self._instance.process, bytes(batch.data), batch.spans,
                          batch.timestamps, self.watermark, self.processing_time)

    @property
    def last_timestamps(self) -> List[Optional[int]]:
        """The timestamps of the outputs of the last call."""
        return list(self._timestamps)

    def side_output(self, name: str) -> list:
        """The records sent to side output ``name`` so far (and forgets them)."""
        return [_codec.decode(_codec.JSON, r[1]) for r in self._side.pop(name, [])]

    @property
    def timers(self) -> List[Tuple[TimeDomain, int]]:
        """The registered timers (domain, time), in time order."""
        return [(TimeDomain(d), t) for t, d, _ in sorted(self._host.timers)]

    def advance_watermark(self, watermark: int) -> list:
        """Move the watermark; fire due event-time timers and windows."""
        self.watermark = watermark
        return self._fire(TimeDomain.EVENT_TIME, watermark)

    def advance_processing_time(self, time: int) -> list:
        """Move the processing time; fire due processing-time timers and windows."""
        self.processing_time = time
        self._host.now = time
        return self._fire(TimeDomain.PROCESSING_TIME, time)

    def _fire(self, domain: TimeDomain, upto: int) -> list:
        w = self._windows
        out: list = []
        if w is not None:
            if w.spec.domain is not domain:
                return out
            due = sorted((end, key, start) for key, start, end in w.windows
                         if end - 1 <= upto and (key, start, end) not in w.fired)
            for end, key, start in due:
                out.extend(self._fire_window(key, start, end))
            self._purge()
            return out
        while True:
            due = [t for t in sorted(self._host.timers) if t[1] == domain.value and t[0] <= upto]
            if not due:
                return out
            time, _, key = due[0]
            self._host.timers.discard(due[0])
            out.extend(self._call(self._instance.on_timer, [(key, time, domain)],
                                  self.watermark, self.processing_time))

    def _purge(self) -> None:
        w = self._windows
        for key, start, end in list(w.windows):
            if (key, start, end) in w.fired and (
                w.spec.domain is TimeDomain.PROCESSING_TIME or w.late(end, self.watermark)
            ):
                del w.windows[(key, start, end)]
                w.fired.discard((key, start, end))

    def _fire_window(self, key: bytes, start: int, end: int) -> list:
        w = self._windows
        contents = w.windows[(key, start, end)]
        strings = [contents] if w.aggregate else list(contents)
        data = b"".join(strings)
        ends = []
        total = 0
        for s in strings:
            total += len(s)
            ends.append(total)
        w.fired.add((key, start, end))
        return self._call(self._instance.fire, [(key, start, end)], data, ends, [len(strings)],
                          self.watermark, self.processing_time)

    def _as_json(self, value: bytes) -> bytes:
        """An input record as JSON (a late record on its side output)."""
        if self.codecs.input != _rows.ROW:
            return _codec.transcode(self.codecs.input, _codec.JSON, value)
        typed = _rows.read(self._input_type, value)
        return _codec.encode(_codec.JSON, _rows.to_plain(self._input_type, typed, _codec.JSON))

    def _window_record(self, key: bytes, value: bytes, timestamp: Optional[int]) -> list:
        w = self._windows
        if w.spec.domain is TimeDomain.EVENT_TIME:
            if timestamp is None:
                raise OperatorError(
                    "an event-time window needs timestamps: give the source a `timestamp` "
                    "or a `timestamp-assigner`"
                )
            t = timestamp
        else:
            t = self.processing_time
        assigned = [(s, e) for s, e in w.assign(t) if not w.late(e, self.watermark)]
        if not assigned:
            self._side.setdefault("late", []).append(
                (None, self._as_json(value), timestamp))
            return []
        out: list = []
        for start, end in assigned:
            sources = []
            if w.spec.kind == "session":
                for (k, s, e) in sorted(w.windows):
                    if k == key and s <= end and start <= e:
                        sources.append((k, s, e))
                if sources:
                    start = min(start, *(s for _, s, _ in sources))
                    end = max(end, *(e for _, _, e in sources))
            elif (key, start, end) in w.windows:
                sources.append((key, start, end))
            stored = [w.windows.pop(src) for src in sources]
            refire = any(src in w.fired for src in sources)
            for src in sources:
                w.fired.discard(src)
            if w.aggregate:
                accs = list(stored)
                batch = OutBatch()
                batch.push(None, value, timestamp)
                (merged,) = self._instance.accumulate(bytes(batch.data), batch.spans,
                                                      batch.timestamps, accs, [len(accs)], [0])
                w.windows[(key, start, end)] = merged
            else:
                records = [r for rs in stored for r in rs]
                records.append(value)
                w.windows[(key, start, end)] = records
            on_time = w.spec.domain is TimeDomain.EVENT_TIME and self.watermark is not None \
                and end - 1 <= self.watermark
            if refire or on_time:
                out.extend(self._fire_window(key, start, end))
        return out


def _name_of(operator: Any) -> str:
    for name, entry in REGISTRY.items():
        if getattr(entry, "target", None) is operator:
            return name
    raise OperatorError(f"{operator!r} is not a registered operator: decorate it with @weir.…")
