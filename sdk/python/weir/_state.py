"""Keyed state handles and the per-batch state cache.

A handle (:class:`ValueState`, :class:`ListState`, :class:`MapState`)
addresses one declared state; every access is scoped to the key of the record
(or timer) being handled. Within a batch, entries live in a cache inside the
guest: the value states of all the batch's keys are fetched in one host call
when the batch starts, other reads happen on first use, and the batch's
changes go to the host in one call each when it ends.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar

from . import _rows
from . import codec as _codec
from . import types as _types
from ._batch import pack

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

_RAW, _DECODED = 0, 1


class StateError(RuntimeError):
    """Keyed state used where there is none (no current key)."""


class _MapSlot:
    __slots__ = ("cleared", "changes", "reads")

    def __init__(self) -> None:
        self.cleared = False
        # Changes in this batch, by encoded user key: None removes.
        self.changes: Dict[bytes, Optional[bytes]] = {}
        # Host answers read in this batch.
        self.reads: Dict[bytes, Optional[bytes]] = {}


class StateCache:
    """The state of one operator instance as one batch sees it."""

    def __init__(self, host: Any, codec: str) -> None:
        self.host = host
        self.codec = codec
        self.key: Optional[bytes] = None
        self.value_ids: List[int] = []
        # Per value state: key -> [_RAW, bytes | None] or [_DECODED, value, dirty]
        self.values: List[Dict[bytes, list]] = []
        self.list_ids: List[int] = []
        # Per list state: key -> (False, appended values, None), or when its
        # contents are known (True, items, stored): the host holds the first
        # ``stored`` items as they are (the rest are appended at the end of
        # the batch), or ``stored`` is None and the list is written whole.
        self.lists: List[Dict[bytes, Tuple[bool, list, Optional[int]]]] = []
        self.map_ids: List[int] = []
        self.maps: List[Dict[bytes, _MapSlot]] = []
        # Per value, list and map state: how its values (a map's values,
        # not its keys) are read and written: in the codec, or as rows of
        # the type it was declared with.
        self.value_coders: List[Tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = []
        self.list_coders: List[Tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = []
        self.map_coders: List[Tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = []

    def declare(self, name: str, kind: str, ttl: Optional[Tuple[int, bool]] = None,
                node: Optional[_types.Node] = None) -> int:
        if node is not None:
            state = self.host.declare_typed_state(name, kind, ttl, _types.text(node))
            coder = (_rows.reader(_rows.ROW, node), _rows.writer(_rows.ROW, node))
        else:
            if ttl is None:
                state = self.host.declare_state(name, kind)
            else:
                state = self.host.declare_state_ttl(name, kind, ttl[0], ttl[1])
            codec = self.codec
            coder = (lambda data: _codec.decode(codec, data),
                     lambda value: _codec.encode(codec, value))
        if kind == "value":
            self.value_ids.append(state)
            self.values.append({})
            self.value_coders.append(coder)
            return len(self.values) - 1
        if kind == "list":
            self.list_ids.append(state)
            self.lists.append({})
            self.list_coders.append(coder)
            return len(self.lists) - 1
        self.map_ids.append(state)
        self.maps.append({})
        self.map_coders.append(coder)
        return len(self.maps) - 1

    def current(self) -> bytes:
        key = self.key
        if key is None:
            raise StateError(
                "keyed state is only available in a keyed_process operator, "
                "while it handles a record or timer"
            )
        return key

    def prefetch(self, keys: List[bytes]) -> None:
        """Fetch the value states of ``keys`` in one host call."""
        if not self.value_ids:
            return
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return
        answers = self.host.get_values(self.value_ids, wanted)
        per_key = len(self.value_ids)
        for i, answer in enumerate(answers):
            slots = self.values[i % per_key]
            key = wanted[i // per_key]
            if key not in slots:
                slots[key] = [_RAW, answer]

    def take(self) -> Tuple[list, list]:
        """Drain the batch's changes: value puts as ``(state, keys, values)``
        packed per state, and the other changes in order."""
        puts = []
        ops = []
        for slots, state, (_, encode) in zip(self.values, self.value_ids, self.value_coders):
            keys = []
            values = []
            for key, slot in slots.items():
                if slot[0] == _DECODED and slot[2]:
                    if slot[1] is None:
                        ops.append(("clear", state, key))
                    else:
                        keys.append(key)
                        values.append(encode(slot[1]))
            slots.clear()
            if keys:
                puts.append((state, pack(keys), pack(values)))
        for slots, state in zip(self.lists, self.list_ids):
            for key, (known, items, stored) in slots.items():
                # What was only added is appended: the host keeps what it
                # holds as it is (a time-to-live's expiry times too).
                if not known:
                    if items:
                        ops.append(("append-list", state, key, items))
                elif stored is None:
                    ops.append(("replace-list", state, key, items) if items else ("clear", state, key))
                elif len(items) > stored:
                    ops.append(("append-list", state, key, items[stored:]))
            slots.clear()
        for slots, state in zip(self.maps, self.map_ids):
            for key, slot in slots.items():
                if slot.cleared:
                    ops.append(("clear", state, key))
                for map_key in sorted(slot.changes):
                    value = slot.changes[map_key]
                    if value is None:
                        ops.append(("remove-entry", state, key, map_key))
                    else:
                        ops.append(("put-entry", state, key, map_key, value))
            slots.clear()
        return puts, ops

    def discard(self) -> None:
        """Drop the batch's cached entries and changes (the batch failed)."""
        for group in (self.values, self.lists, self.maps):
            for slots in group:
                slots.clear()
        self.key = None


class ValueState(Generic[T]):
    """One value per key, like Flink's ``ValueState``; declared in ``open``
    with :meth:`weir.OpenContext.value_state`.

    The value :meth:`value` returns is the cached object itself: after
    changing a list or dict in place, call :meth:`update` with it, or the
    change is not kept.
    """

    __slots__ = ("_cache", "_slot")

    def __init__(self, cache: StateCache, slot: int) -> None:
        self._cache = cache
        self._slot = slot

    def _entry(self) -> list:
        cache = self._cache
        key = cache.current()
        slots = cache.values[self._slot]
        entry = slots.get(key)
        if entry is None:
            raw = cache.host.get_values([cache.value_ids[self._slot]], [key])[0]
            entry = slots[key] = [_RAW, raw]
        if entry[0] == _RAW:
            raw = entry[1]
            value = None if raw is None else cache.value_coders[self._slot][0](raw)
            entry[:] = [_DECODED, value, False]
        return entry

    def value(self) -> Optional[T]:
        """The current key's value, or ``None`` when it has none."""
        return self._entry()[1]

    def update(self, value: Optional[T]) -> None:
        """Set the current key's value (``None`` clears it)."""
        cache = self._cache
        # Encoded once, when the batch ends.
        cache.values[self._slot][cache.current()] = [_DECODED, value, True]

    def clear(self) -> None:
        """Remove the current key's value."""
        self.update(None)


class ListState(Generic[T]):
    """A list of values per key, like Flink's ``ListState``; declared with
    :meth:`weir.OpenContext.list_state`. Adding to a list does not read it."""

    __slots__ = ("_cache", "_slot")

    def __init__(self, cache: StateCache, slot: int) -> None:
        self._cache = cache
        self._slot = slot

    def _known(self) -> Tuple[bool, list, Optional[int]]:
        cache = self._cache
        key = cache.current()
        slots = cache.lists[self._slot]
        slot = slots.get(key)
        if slot is None or not slot[0]:
            stored = cache.host.get_list(cache.list_ids[self._slot], key)
            appended = slot[1] if slot is not None else []
            slot = slots[key] = (True, list(stored) + appended, len(stored))
        return slot

    def get(self) -> List[T]:
        """The current key's values, oldest first (empty when it has none)."""
        decode = self._cache.list_coders[self._slot][0]
        return [decode(v) for v in self._known()[1]]

    def add(self, value: T) -> None:
        """Add ``value`` at the end of the current key's list."""
        self.add_all([value])

    def add_all(self, values: List[T]) -> None:
        """Add ``values`` at the end of the current key's list."""
        cache = self._cache
        key = cache.current()
        encode = cache.list_coders[self._slot][1]
        encoded = [encode(v) for v in values]
        slots = cache.lists[self._slot]
        slot = slots.get(key)
        if slot is None:
            slots[key] = (False, encoded, None)
        elif slot[0]:
            slots[key] = (True, slot[1] + encoded, slot[2])
        else:
            slot[1].extend(encoded)

    def update(self, values: List[T]) -> None:
        """Replace the current key's list with ``values``."""
        cache = self._cache
        key = cache.current()
        encode = cache.list_coders[self._slot][1]
        cache.lists[self._slot][key] = (True, [encode(v) for v in values], None)

    def clear(self) -> None:
        """Remove the current key's list."""
        self.update([])


class MapState(Generic[K, V]):
    """A map from user keys to values per key, like Flink's ``MapState``;
    declared with :meth:`weir.OpenContext.map_state`. Entries are ordered by
    their encoded user keys."""

    __slots__ = ("_cache", "_slot")

    def __init__(self, cache: StateCache, slot: int) -> None:
        self._cache = cache
        self._slot = slot

    def _slot_of(self) -> Tuple[bytes, _MapSlot]:
        cache = self._cache
        key = cache.current()
        slots = cache.maps[self._slot]
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = _MapSlot()
        return key, slot

    def _raw(self, map_key: K) -> Optional[bytes]:
        cache = self._cache
        key, slot = self._slot_of()
        mk = _codec.encode(cache.codec, map_key)
        if mk in slot.changes:
            return slot.changes[mk]
        if slot.cleared:
            return None
        if mk not in slot.reads:
            slot.reads[mk] = cache.host.get_entry(cache.map_ids[self._slot], key, mk)
        return slot.reads[mk]

    def get(self, map_key: K, default: Optional[V] = None) -> Optional[V]:
        """The value under ``map_key``, or ``default``."""
        raw = self._raw(map_key)
        return default if raw is None else self._cache.map_coders[self._slot][0](raw)

    def contains(self, map_key: K) -> bool:
        """Whether ``map_key`` has a value."""
        return self._raw(map_key) is not None

    def __contains__(self, map_key: K) -> bool:
        return self.contains(map_key)

    def put(self, map_key: K, value: V) -> None:
        """Set the value under ``map_key``."""
        cache = self._cache
        _, slot = self._slot_of()
        encode = cache.map_coders[self._slot][1]
        slot.changes[_codec.encode(cache.codec, map_key)] = encode(value)

    def put_all(self, entries: Dict[K, V]) -> None:
        """Set every entry of ``entries``."""
        for k, v in entries.items():
            self.put(k, v)

    def remove(self, map_key: K) -> None:
        """Remove the entry under ``map_key`` (nothing if there is none)."""
        _, slot = self._slot_of()
        slot.changes[_codec.encode(self._cache.codec, map_key)] = None

    def _entries(self) -> List[Tuple[bytes, bytes]]:
        cache = self._cache
        key, slot = self._slot_of()
        merged: Dict[bytes, Optional[bytes]] = {}
        if not slot.cleared:
            merged.update(cache.host.get_entries(cache.map_ids[self._slot], key))
        merged.update(slot.changes)
        return sorted((k, v) for k, v in merged.items() if v is not None)

    def items(self) -> Iterator[Tuple[K, V]]:
        """Every (user key, value) of the current key's map."""
        codec = self._cache.codec
        decode = self._cache.map_coders[self._slot][0]
        for k, v in self._entries():
            yield _codec.decode(codec, k), decode(v)

    def keys(self) -> Iterator[K]:
        """Every user key of the current key's map."""
        for k, _ in self.items():
            yield k

    def values(self) -> Iterator[V]:
        """Every value of the current key's map."""
        for _, v in self.items():
            yield v

    def is_empty(self) -> bool:
        """Whether the current key's map has no entries."""
        return not self._entries()

    def clear(self) -> None:
        """Remove every entry of the current key's map."""
        _, slot = self._slot_of()
        slot.cleared = True
        slot.changes.clear()
        slot.reads.clear()
