"""Runs an operator over a call: decodes records, keeps the current key,
serves state from the cache, collects the call's effects and hands them to
the host. The same code runs in the component and in :mod:`weir.testing`;
only the host differs."""

from __future__ import annotations

import dataclasses
import os
import re
import traceback
from typing import Any, Callable, List, Optional, Tuple

from ._batch import OutBatch, records as _records, unpack
from ._context import Codecs, Context, OpenContext, Pending, TimeDomain, Window, WindowSpec
from ._operators import REGISTRY, Handler
from ._state import StateCache
from . import _rows

_SDK_DIR = os.path.dirname(os.path.abspath(__file__))
_MOUNT = re.compile(r"^/\d+/")
#: At most this much of a traceback goes into a task's error.
_MAX_ERROR = 4000


class OperatorError(Exception):
    """An operator failed: the message names it and carries the traceback
    of the operator's code."""


def describe(name: str, e: BaseException) -> str:
    """``operator `name`: Type: message`` and the traceback of the operator's
    own frames (the SDK's are left out)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(_SDK_DIR + os.sep)]
    for f in frames:
        # In a component, the project's files are mounted at /0, /1, ...:
        # show their paths in the project.
        f.filename = _MOUNT.sub("", f.filename)
    text = f"operator `{name}`: {type(e).__name__}: {e}"
    if frames:
        text += "\nTraceback (most recent call last):\n" + "".join(traceback.format_list(frames))
    if len(text) > _MAX_ERROR:
        text = text[: _MAX_ERROR - 3] + "..."
    return text.rstrip("\n")


class Instance:
    """One created operator of one subtask, with its own state cache."""

    def __init__(self, name: str, config: List[Tuple[str, str]], window: Optional[WindowSpec],
                 codecs: Codecs, host: Any) -> None:
        entry = REGISTRY.get(name)
        if entry is None:
            raise OperatorError(
                f"no operator named `{name}` in this component (it has: {', '.join(REGISTRY)})"
            )
        self.name = name
        self.keyed = entry.keyed
        self.vectorized = entry.vectorized
        try:
            self.codecs = dataclasses.replace(codecs, input_type=entry.input_type,
                                              output_type=entry.writes)
        except Exception as e:
            raise OperatorError(f"operator `{name}`: {e}") from None
        self.host = host
        self.cache = StateCache(host, codecs.state)
        ctx = OpenContext(config, entry.keyed, window, self.cache)
        try:
            self.handler: Handler = entry.make(ctx)
        except Exception as e:
            raise OperatorError(describe(name, e).replace(
                f"operator `{name}`:", f"operator `{name}` failed to open:", 1)) from None

    def _hand_over(self, side: Optional[str], batch: OutBatch) -> None:
        if side is None:
            self.host.emit(batch)
        else:
            self.host.emit_side(side, batch)

    def _run(self, items: List[Any], watermark: Optional[int], processing_time: int,
             each: Callable[[Any, Pending, Context], None]) -> None:
        pending = Pending(self.codecs, watermark, processing_time, self._hand_over)
        ctx = Context(pending, self.cache)
        try:
            for item in items:
                each(item, pending, ctx)
            self.cache.key = None
            puts, ops = self.cache.take()
        except Exception as e:
            self.cache.discard()
            raise OperatorError(describe(self.name, e)) from None
        host = self.host
        if len(pending.outputs):
            host.emit(pending.outputs)
        for name, batch in pending.side.items():
            if len(batch):
                host.emit_side(name, batch)
        for state, keys, values in puts:
            host.put_values(state, keys, values)
        if ops:
            host.update_state(ops)
        if pending.timer_ops:
            host.update_timers(pending.timer_ops)

    def process(self, data: bytes, spans: List[int], timestamps: List[int],
                watermark: Optional[int], processing_time: int) -> None:
        """Handle a batch of records."""
        records = _records(data, spans, timestamps)
        if self.vectorized:
            self._vectorized(records, watermark, processing_time)
            return
        cache = self.cache
        if self.keyed:
            for i, r in enumerate(records):
                if r[0] is None:
                    raise OperatorError(
                        f"operator `{self.name}` is a keyed_process but record {i} of the batch "
                        "has no key (use key-by in the manifest)"
                    )
            cache.prefetch([r[0] for r in records])
        handler = self.handler

        def each(record: Any, pending: Pending, ctx: Context) -> None:
            pending.timestamp = record[2]
            cache.key = record[0]
            handler.record(record[1], pending, ctx)

        self._run(records, watermark, processing_time, each)

    def _vectorized(self, records: List[Any], watermark: Optional[int],
                    processing_time: int) -> None:
        """A vectorized map's batch: its records as columns, one call."""
        if not records:
            return
        codecs = self.codecs
        f = self.handler.f  # type: ignore[attr-defined]

        def each(_: Any, pending: Pending, ctx: Context) -> None:
            cols = _rows.columns(codecs.input, codecs.input_type, [r[1] for r in records],
                                 codecs.read)
            out = f(cols)
            keep = out.get(_rows.KEEP) if isinstance(out, dict) else None
            values = _rows.rows_of(codecs.output, codecs.output_type, out, len(records),
                                   codecs.write)
            if keep is not None:
                # Checked whole before anything is emitted.
                if isinstance(keep, (str, bytes, dict)) or not hasattr(keep, "__iter__"):
                    raise TypeError(f"weir.KEEP is a {type(keep).__name__}: a list of booleans "
                                    "is needed")
                keep = list(keep)
                if len(keep) != len(records):
                    raise ValueError(f"weir.KEEP has {len(keep)} values for {len(records)} records")
                if any(type(k) is not bool for k in keep):
                    raise TypeError("weir.KEEP holds something other than True and False")
            for i, value in enumerate(values):
                if keep is None or keep[i]:
                    pending.push_encoded(value, None, records[i][2])

        self._run([None], watermark, processing_time, each)

    def on_timer(self, timers: List[Tuple[bytes, int, TimeDomain]], watermark: Optional[int],
                 processing_time: int) -> None:
        """Handle fired timers (key, time, domain), in order."""
        cache = self.cache
        if self.keyed:
            cache.prefetch([t[0] for t in timers])
        handler = self.handler

        def each(timer: Any, pending: Pending, ctx: Context) -> None:
            key, time, domain = timer
            pending.timestamp = time if domain is TimeDomain.EVENT_TIME else None
            cache.key = key
            handler.timer(time, domain, ctx)

        self._run(timers, watermark, processing_time, each)

    def accumulate(self, data: bytes, spans: List[int], timestamps: List[int],
                   accumulators: List[bytes], groups: List[int], targets: List[int]) -> List[bytes]:
        """Fold records into accumulators (a window aggregate)."""
        values = [r[1] for r in _records(data, spans, timestamps)]
        if len(targets) != len(values):
            raise OperatorError(f"accumulate: {len(targets)} targets for {len(values)} records")
        try:
            return self.handler.accumulate(values, accumulators, groups, targets,
                                           self.codecs.read, self.codecs.state)
        except Exception as e:
            raise OperatorError(describe(self.name, e)) from None

    def fire(self, windows: List[Tuple[bytes, int, int]], contents: bytes, content_ends: List[int],
             ends: List[int], watermark: Optional[int], processing_time: int) -> None:
        """Windows (key, start, end) fire; window ``w``'s contents are the
        strings ``ends[w - 1] .. ends[w]`` of the packed ``contents``."""
        if len(ends) != len(windows):
            raise OperatorError(f"fire: {len(ends)} content ranges for {len(windows)} windows")
        strings = unpack(contents, content_ends)
        items = []
        start = 0
        codec = self.codecs.input_keys
        for (key, w_start, w_end), end in zip(windows, ends):
            if end < start or end > len(strings):
                raise OperatorError("a window's contents are outside the call's")
            items.append((Window(key, w_start, w_end, codec), strings[start:end]))
            start = end
        handler = self.handler

        def each(item: Any, pending: Pending, ctx: Context) -> None:
            window, contents = item
            pending.timestamp = window.end - 1
            handler.fire(window, contents, pending, ctx)

        self._run(items, watermark, processing_time, each)
