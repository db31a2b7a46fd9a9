"""What an operator sees of the runtime: :class:`Context` per record, timer
or window, :class:`OpenContext` when it is created."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _rows
from . import codec as _codec
from . import types as _types
from ._batch import OutBatch
from ._state import ListState, MapState, StateCache, ValueState


class TimeDomain(enum.Enum):
    """Which clock a timer follows."""

    #: Fires when the task's watermark reaches the time.
    EVENT_TIME = "event-time"
    #: Fires when the worker's wall clock reaches the time.
    PROCESSING_TIME = "processing-time"


@dataclass(frozen=True)
class WindowSpec:
    """The windows a job's manifest gives a window function."""

    #: ``"tumbling"``, ``"sliding"`` or ``"session"``.
    kind: str
    #: Window length, ms (tumbling and sliding).
    size_ms: Optional[int]
    #: Distance between window starts, ms (sliding).
    slide_ms: Optional[int]
    #: Inactivity gap, ms (session).
    gap_ms: Optional[int]
    #: Which clock windows follow.
    domain: TimeDomain
    #: How long after its end a window still takes records, ms.
    allowed_lateness_ms: int


class Window:
    """One window of one key: ``[start, end)`` in ms."""

    __slots__ = ("start", "end", "_key", "_codec")

    def __init__(self, key: bytes, start: int, end: int, codec: str) -> None:
        #: First instant in the window.
        self.start = start
        #: First instant after it.
        self.end = end
        self._key = key
        self._codec = codec

    @property
    def key(self) -> Any:
        """The key whose window this is, decoded."""
        return _codec.decode(self._codec, self._key)

    @property
    def key_bytes(self) -> bytes:
        """The key's bytes, in the window operator's input codec."""
        return self._key

    @property
    def max_timestamp(self) -> int:
        """The last instant in the window, the timestamp of its results."""
        return self.end - 1

    def __repr__(self) -> str:
        return f"Window(key={self._key!r}, start={self.start}, end={self.end})"


@dataclass
class Codecs:
    """The codecs one operator reads and writes with, and the types it
    declared (:mod:`weir.types`; ``None``: plain values)."""

    input: str = _codec.JSON
    output: str = _codec.JSON
    side_outputs: Dict[str, str] = field(default_factory=dict)
    state: str = _codec.JSON
    input_type: Any = None
    output_type: Any = None

    def __post_init__(self) -> None:
        #: A record's bytes to its value.
        self.read: Callable[[bytes], Any] = _rows.reader(self.input, self.input_type)
        #: A value to an output record's bytes.
        self.write: Callable[[Any], bytes] = _rows.writer(self.output, self.output_type)

    def transcode(self, value: bytes) -> bytes:
        """An input record as an output record (a filter's, a timestamp
        assigner's), all of it: the same bytes when the codecs agree; read
        as its type only from rows (whose type is the stream's, where a
        declared type may read fewer fields than a record has)."""
        if self.input == self.output:
            return bytes(value)
        if self.input == _rows.ROW:
            return self.write(self.read(value))
        return _codec.transcode(self.input, self.output, value)

    @property
    def input_keys(self) -> str:
        """The codec of the input's keys."""
        return _rows.key_codec(self.input)

    @property
    def output_keys(self) -> str:
        """The codec of the main output's keys."""
        return _rows.key_codec(self.output)


class Pending:
    """The effects of one call, collected in the guest and handed over at its
    end (or early, when an output grows large)."""

    def __init__(self, codecs: Codecs, watermark: Optional[int], processing_time: int,
                 hand_over: Callable[[Optional[str], OutBatch], None]) -> None:
        self.codecs = codecs
        self.timestamp: Optional[int] = None
        self.watermark = watermark
        self.processing_time = processing_time
        self.outputs = OutBatch()
        self.side: Dict[str, OutBatch] = {}
        self.timer_ops: List[Tuple[bool, bytes, int, TimeDomain]] = []
        self._hand_over = hand_over

    def push(self, value: Any, key: Optional[bytes] = None) -> None:
        self.push_encoded(self.codecs.write(value), key, self.timestamp)

    def push_encoded(self, value: bytes, key: Optional[bytes], timestamp: Optional[int]) -> None:
        out = self.outputs
        out.push(key, value, timestamp)
        if out.is_large():
            self._hand_over(None, out)
            self.outputs = OutBatch()

    def push_side(self, name: str, value: Any) -> None:
        codec = self.codecs.side_outputs.get(name, _codec.JSON)
        batch = self.side.get(name)
        if batch is None:
            batch = self.side[name] = OutBatch()
        batch.push(None, _codec.encode(codec, value), self.timestamp)
        if batch.is_large():
            self._hand_over(name, batch)
            self.side[name] = OutBatch()


class Context:
    """The runtime as a record, timer or window sees it: emit outputs, read
    the current key, timestamp, watermark and processing time, register
    timers."""

    __slots__ = ("_pending", "_cache")

    def __init__(self, pending: Pending, cache: StateCache) -> None:
        self._pending = pending
        self._cache = cache

    def emit(self, value: Any) -> None:
        """Send ``value`` to the main output, with the current timestamp."""
        self._pending.push(value)

    def emit_keyed(self, key: Any, value: Any) -> None:
        """Send ``value`` to the main output under ``key`` (a downstream
        ``key-by = "key"`` partitions by it)."""
        p = self._pending
        p.push(value, _codec.encode(p.codecs.output_keys, key))

    def emit_side(self, name: str, value: Any) -> None:
        """Send ``value`` to the side output ``name`` (routed in the manifest
        with ``input = "operator:name"``; dropped when nothing reads it)."""
        self._pending.push_side(name, value)

    @property
    def timestamp(self) -> Optional[int]:
        """The event time of the record (a timer's time for an event-time
        timer, ``end - 1`` for a window), ms; ``None`` when it has none."""
        return self._pending.timestamp

    @property
    def watermark(self) -> Optional[int]:
        """The task's current watermark, ms; ``None`` before the first."""
        return self._pending.watermark

    @property
    def processing_time(self) -> int:
        """The worker's wall clock, ms since the epoch."""
        return self._pending.processing_time

    @property
    def key(self) -> Any:
        """The current key, decoded (keyed streams only)."""
        key = self._cache.key
        if key is None:
            raise RuntimeError("this operator is not on a keyed stream")
        return _codec.decode(self._pending.codecs.input_keys, key)

    @property
    def key_bytes(self) -> Optional[bytes]:
        """The current key's bytes, in the input's codec."""
        return self._cache.key

    def _timer(self, register: bool, domain: TimeDomain, time: int) -> None:
        if not isinstance(time, int) or isinstance(time, bool):
            raise TypeError(f"a timer's time is an int of ms, not {type(time).__name__}")
        self._pending.timer_ops.append((register, self._cache.current(), time, domain))

    def register_event_time_timer(self, time: int) -> None:
        """Call ``on_timer`` for the current key once the watermark reaches
        ``time``. One timer exists per key and time."""
        self._timer(True, TimeDomain.EVENT_TIME, time)

    def register_processing_time_timer(self, time: int) -> None:
        """Call ``on_timer`` for the current key once the wall clock reaches
        ``time``."""
        self._timer(True, TimeDomain.PROCESSING_TIME, time)

    def delete_event_time_timer(self, time: int) -> None:
        """Delete the current key's event-time timer at ``time``, if any."""
        self._timer(False, TimeDomain.EVENT_TIME, time)

    def delete_processing_time_timer(self, time: int) -> None:
        """Delete the current key's processing-time timer at ``time``, if any."""
        self._timer(False, TimeDomain.PROCESSING_TIME, time)


class OpenContext:
    """What an operator gets when it is created: the job's parameters and
    the declaration of keyed state."""

    def __init__(self, config: List[Tuple[str, str]], keyed: bool,
                 window: Optional[WindowSpec], cache: StateCache) -> None:
        self._config = dict(config)
        self._keyed = keyed
        self._cache = cache
        #: The windows of a window function (``None`` for other operators).
        self.window = window

    @property
    def params(self) -> Dict[str, str]:
        """Every parameter of the job, by name (and the runtime's
        ``weir.*`` settings)."""
        return dict(self._config)

    def param(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The job parameter ``name``, or ``default``."""
        return self._config.get(name, default)

    def required_param(self, name: str, type: Callable[[str], Any] = str) -> Any:
        """The job parameter ``name`` converted with ``type``; an error naming
        it when it is missing or does not convert."""
        raw = self._config.get(name)
        if raw is None:
            raise ValueError(f"missing parameter `{name}`")
        try:
            return type(raw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"parameter `{name}` = {raw!r}: {e}") from None

    @property
    def attempt_number(self) -> int:
        """How many times the task was restarted (0 on the first run)."""
        try:
            return int(self._config.get("weir.attempt", "0"))
        except ValueError:
            return 0

    def _declare(self, name: str, kind: str, ttl_ms: Optional[int] = None,
                 refresh_on_read: bool = False, type: Any = None) -> int:
        if not self._keyed:
            raise ValueError(f"state `{name}`: keyed state needs a keyed_process operator")
        node = None if type is None else _types.type_of(type)
        if ttl_ms is None:
            return self._cache.declare(name, kind, None, node)
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise ValueError(
                f"state `{name}`: ttl_ms is a whole number of milliseconds, at least 1 "
                f"(got {ttl_ms!r})")
        return self._cache.declare(name, kind, (ttl_ms, bool(refresh_on_read)), node)

    def value_state(self, name: str, ttl_ms: Optional[int] = None,
                    refresh_on_read: bool = False, type: Any = None) -> ValueState:
        """Declare the value state ``name``.

        With ``ttl_ms`` its value expires that many milliseconds of
        processing time after it was last written (with
        ``refresh_on_read``, also read): an expired value reads as ``None``
        and is cleaned out of the state (Flink's state time-to-live).

        With ``type`` (a dataclass, or any type of :mod:`weir.types`), its
        values are kept as **rows** of that type, as Flink's
        ``ValueStateDescriptor`` takes a ``TypeInformation``: read as
        instances of the dataclass, and kept with the type, so that a new
        version of the operator that declares another type reads what an
        older one wrote by field name (a field added as ``Optional`` reads
        ``None``), or is refused naming the field (docs/types.md, "State
        and schema evolution")."""
        return ValueState(self._cache,
                          self._declare(name, "value", ttl_ms, refresh_on_read, type))

    def list_state(self, name: str, ttl_ms: Optional[int] = None,
                   refresh_on_read: bool = False, type: Any = None) -> ListState:
        """Declare the list state ``name``; with ``ttl_ms``, each element
        expires on its own, with ``type`` its elements are rows of it (see
        :meth:`value_state`)."""
        return ListState(self._cache,
                         self._declare(name, "list", ttl_ms, refresh_on_read, type))

    def map_state(self, name: str, ttl_ms: Optional[int] = None,
                  refresh_on_read: bool = False, type: Any = None) -> MapState:
        """Declare the map state ``name``; with ``ttl_ms``, each entry
        expires on its own, with ``type`` its values (not its keys) are
        rows of it (see :meth:`value_state`)."""
        return MapState(self._cache,
                        self._declare(name, "map", ttl_ms, refresh_on_read, type))
