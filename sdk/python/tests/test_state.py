import struct
from dataclasses import dataclass
from typing import Optional

import pytest

import weir
from weir import _rows, types
from weir.testing import Harness
from weir.types import U32, U64


@weir.keyed_process("s-sum")
class Sum(weir.KeyedProcess):
    def open(self, ctx):
        self.total = ctx.value_state("total")

    def process(self, n, ctx):
        total = (self.total.value() or 0) + n
        if total == 0:
            self.total.clear()
        else:
            self.total.update(total)
        ctx.emit([ctx.key, total])


@weir.keyed_process("s-kinds")
class Kinds(weir.KeyedProcess):
    def open(self, ctx):
        self.seen = ctx.list_state("seen")
        self.counts = ctx.map_state("counts")

    def process(self, record, ctx):
        op = record["op"]
        if op == "add":
            self.seen.add(record["v"])
            self.counts.put(record["v"], (self.counts.get(record["v"]) or 0) + 1)
        elif op == "read":
            ctx.emit({"seen": self.seen.get(), "counts": dict(self.counts.items()),
                      "has_a": "a" in self.counts, "empty": self.counts.is_empty()})
        elif op == "drop":
            self.counts.remove(record["v"])
            self.seen.update([v for v in self.seen.get() if v != record["v"]])
        elif op == "clear":
            self.seen.clear()
            self.counts.clear()


@weir.keyed_process("s-quiet")
class CountUntilQuiet(weir.KeyedProcess):
    """Emits each key's count once no record of it came for 10 seconds."""

    def open(self, ctx):
        self.count = ctx.value_state("count")
        self.deadline = ctx.value_state("deadline")

    def process(self, record, ctx):
        self.count.update((self.count.value() or 0) + 1)
        old = self.deadline.value()
        if old is not None:
            ctx.delete_event_time_timer(old)
        self.deadline.update(ctx.timestamp + 10_000)
        ctx.register_event_time_timer(ctx.timestamp + 10_000)

    def on_timer(self, time, domain, ctx):
        assert domain is weir.TimeDomain.EVENT_TIME and ctx.timestamp == time
        yield {"key": ctx.key, "count": self.count.value(), "at": time}
        self.count.clear()
        self.deadline.clear()


@pytest.mark.parametrize("msgpack", [False, True])
def test_value_state_per_key(msgpack):
    h = Harness("s-sum", msgpack=msgpack)
    assert h.process(5, key="a") == [["a", 5]]
    assert h.process(2, key="b") == [["b", 2]]
    assert h.process(2, key="a") == [["a", 7]]
    assert h.process(-7, key="a") == [["a", 0]]
    assert h.process(1, key="a") == [["a", 1]]


@pytest.mark.parametrize("msgpack", [False, True])
def test_list_and_map_state(msgpack):
    h = Harness("s-kinds", msgpack=msgpack)
    for v in ["b", "a", "b"]:
        h.process({"op": "add", "v": v}, key="k")
    read = {"op": "read"}
    assert h.process(read, key="k") == [
        {"seen": ["b", "a", "b"], "counts": {"a": 1, "b": 2}, "has_a": True, "empty": False}
    ]
    assert h.process(read, key="other") == [
        {"seen": [], "counts": {}, "has_a": False, "empty": True}
    ]
    h.process({"op": "drop", "v": "a"}, key="k")
    assert h.process(read, key="k")[0]["counts"] == {"b": 2}
    assert h.process(read, key="k")[0]["seen"] == ["b", "b"]
    h.process({"op": "clear"}, key="k")
    assert h.process(read, key="k") == [{"seen": [], "counts": {}, "has_a": False, "empty": True}]


def test_event_time_timers_fire_with_the_watermark_and_can_be_deleted():
    h = Harness("s-quiet")
    h.process({}, key="k", timestamp=0)
    h.process({}, key="k", timestamp=5_000)
    assert h.timers == [(weir.TimeDomain.EVENT_TIME, 15_000)]
    assert h.advance_watermark(14_999) == []
    assert h.advance_watermark(20_000) == [{"key": "k", "count": 2, "at": 15_000}]
    assert h.last_timestamps == [15_000]
    assert h.timers == []


def test_state_needs_a_keyed_operator_and_a_key():
    @weir.process("s-unkeyed")
    class Unkeyed(weir.Process):
        def open(self, ctx):
            ctx.value_state("x")

    with pytest.raises(weir.OperatorError, match="keyed state needs a keyed_process"):
        Harness("s-unkeyed")


def test_a_failed_batch_leaves_state_as_it_was():
    @weir.keyed_process("s-fails-after-update")
    class FailsAfterUpdate(weir.KeyedProcess):
        def open(self, ctx):
            self.n = ctx.value_state("n")

        def process(self, record, ctx):
            self.n.update((self.n.value() or 0) + 1)
            if record == "boom":
                raise RuntimeError("boom")
            yield self.n.value()

    h = Harness("s-fails-after-update")
    assert h.process("ok", key="k") == [1]
    with pytest.raises(weir.OperatorError, match="RuntimeError: boom"):
        h.process("boom", key="k")
    assert h.process("ok", key="k") == [2]


def test_a_value_state_that_cannot_be_encoded_fails_the_call():
    @weir.keyed_process("s-unencodable")
    class Unencodable(weir.KeyedProcess):
        def open(self, ctx):
            self.v = ctx.value_state("v")

        def process(self, record, ctx):
            self.v.update(object() if record == "bad" else record)
            yield record

    h = Harness("s-unencodable", msgpack=True)
    assert h.process("ok", key="k") == ["ok"]
    with pytest.raises(weir.OperatorError, match="operator `s-unencodable`: CodecError: cannot encode"):
        h.process("bad", key="k")
    assert h.process("again", key="k") == ["again"]


@weir.keyed_process("s-ttl")
class Expiring(weir.KeyedProcess):
    """Counts per key, forgetting a key quiet for 1 s; remembers the last
    10 s of values; a map of flags renewed by reads."""

    def open(self, ctx):
        self.count = ctx.value_state("count", ttl_ms=1_000)
        self.recent = ctx.list_state("recent", ttl_ms=10_000)
        self.flags = ctx.map_state("flags", ttl_ms=1_000, refresh_on_read=True)

    def process(self, record, ctx):
        if record == "read":
            ctx.emit({"recent": self.recent.get(), "flags": dict(self.flags.items())})
            return
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        # Read, then added to: written back whole, its old elements keep
        # the time they were added at.
        assert record not in self.recent.get()
        self.recent.add(record)
        self.flags.put(record, True)
        ctx.emit(n)


@pytest.mark.parametrize("msgpack", [False, True])
def test_state_with_a_time_to_live_expires_by_processing_time(msgpack):
    h = Harness("s-ttl", msgpack=msgpack)
    assert h.process("a", key="k") == [1]
    h.advance_processing_time(999)
    assert h.process("b", key="k") == [2]
    h.advance_processing_time(1_998)
    # Flag `a`, put at 0, expired at 1,000; `b` is read (renewed) at 1,998.
    assert h.process("read", key="k") == [{"recent": ["a", "b"], "flags": {"b": True}}]
    # The count, written at 999, expired at 1,999.
    h.advance_processing_time(2_500)
    assert h.process("c", key="k") == [1]
    h.advance_processing_time(10_000)
    assert h.process("read", key="k") == [{"recent": ["b", "c"], "flags": {}}]
    h.advance_processing_time(12_500)
    assert h.process("read", key="k") == [{"recent": [], "flags": {}}]


def test_a_time_to_live_is_a_positive_number_of_milliseconds():
    @weir.keyed_process("s-ttl-bad")
    class Bad(weir.KeyedProcess):
        def open(self, ctx):
            self.v = ctx.value_state("v", ttl_ms=0)

        def process(self, record, ctx):
            pass

    with pytest.raises(Exception, match="ttl_ms"):
        Harness("s-ttl-bad").process(1, key="k")


class _ListHost:
    """A host holding one stored list, for the cache's write-back."""

    def __init__(self, stored):
        self.stored = stored

    def declare_state(self, name, kind):
        return 7

    def get_list(self, state, key):
        return list(self.stored)


def test_a_list_read_and_added_to_is_appended_to_and_a_list_updated_is_replaced():
    from weir._state import ListState, StateCache

    codec = "json"
    old = [weir.codec.encode(codec, v) for v in ("a", "b")]
    cache = StateCache(_ListHost(old), codec)
    lst = ListState(cache, cache.declare("l", "list"))
    cache.key = b"k"
    assert lst.get() == ["a", "b"]
    lst.add("c")
    # The stored elements are not written again (they keep their expiry
    # times): only what was added goes.
    assert cache.take()[1] == [("append-list", 7, b"k", [weir.codec.encode(codec, "c")])]
    lst.get()
    assert cache.take()[1] == []
    lst.add("c")
    lst.get()
    lst.add("d")
    assert cache.take()[1] == [
        ("append-list", 7, b"k", [weir.codec.encode(codec, v) for v in ("c", "d")])
    ]
    lst.update([v for v in lst.get() if v != "a"])
    assert cache.take()[1] == [
        ("replace-list", 7, b"k", [weir.codec.encode(codec, "b")])
    ]
    lst.get()
    lst.clear()
    lst.add("e")
    assert cache.take()[1] == [("replace-list", 7, b"k", [weir.codec.encode(codec, "e")])]


@dataclass
class Tally:
    count: U64
    last: Optional[str] = None


@weir.keyed_process("s-typed")
class TypedState(weir.KeyedProcess):
    def open(self, ctx):
        self.tally = ctx.value_state("tally", type=Tally)
        self.words = ctx.list_state("words", type=str)
        self.per_word = ctx.map_state("per-word", type=U32, ttl_ms=60_000)

    def process(self, w, ctx):
        t = self.tally.value() or Tally(0)
        assert isinstance(t, Tally)
        self.tally.update(Tally(t.count + 1, w))
        self.words.add(w)
        self.per_word.put(w, (self.per_word.get(w) or 0) + 1)
        ctx.emit([t.count + 1, self.words.get(), dict(self.per_word.items())])


@pytest.mark.parametrize("msgpack", [False, True])
def test_typed_state_keeps_rows_of_its_type(msgpack):
    h = Harness("s-typed", msgpack=msgpack)
    assert h.process("a", key="k") == [[1, ["a"], {"a": 1}]]
    assert h.process("b", key="k") == [[2, ["a", "b"], {"a": 1, "b": 1}]]
    assert h.process("a", key="k") == [[3, ["a", "b", "a"], {"a": 2, "b": 1}]]
    # What the host keeps is rows: the record's, the strings', the u32's.
    store = h._host
    (tally,) = [v for (state, _), v in store.values.items() if state == 0]
    assert _rows.read(types.type_of(Tally), tally) == Tally(3, "a")
    (words,) = store.lists.values()
    assert [_rows.read(types.type_of(str), w) for w in words] == ["a", "b", "a"]
    (entries,) = store.maps.values()
    # A map's values carry their expiry stamp (8 bytes) before the row.
    assert sorted(struct.unpack("<I", v[8:])[0] for v in entries.values()) == [1, 2]


def test_a_typed_state_refuses_a_value_of_another_type():
    @weir.keyed_process("s-typed-wrong")
    class Wrong(weir.KeyedProcess):
        def open(self, ctx):
            self.tally = ctx.value_state("tally", type=Tally)

        def process(self, w, ctx):
            self.tally.update({"count": "many"})

    h = Harness("s-typed-wrong")
    with pytest.raises(Exception, match="count"):
        h.process("a", key="k")
