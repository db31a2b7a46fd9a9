import pytest

import weir
from weir.testing import Harness, session, sliding, tumbling


@weir.window_aggregate("w-count")
class Count(weir.Aggregate):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def merge(self, a, b):
        return a + b

    def get_result(self, acc, window):
        return {"key": window.key, "start": window.start, "count": acc}


@weir.window_process("w-list")
class Collect(weir.ProcessWindow):
    def process(self, window, elements):
        yield {"key": window.key, "start": window.start, "end": window.end,
               "values": sorted(elements)}


@pytest.mark.parametrize("msgpack", [False, True])
def test_tumbling_windows_fire_with_the_watermark_and_refire_when_late(msgpack):
    h = Harness("w-count", window=tumbling(10_000, allowed_lateness_ms=5_000), msgpack=msgpack)
    for t in [1_000, 4_000, 12_000]:
        assert h.process({}, key="a", timestamp=t) == []
    assert h.advance_watermark(9_999) == [{"key": "a", "start": 0, "count": 2}]
    assert h.last_timestamps == [9_999]
    assert h.process({}, key="a", timestamp=3_000) == [{"key": "a", "start": 0, "count": 3}]
    h.advance_watermark(15_000)
    assert h.process({"late": True}, key="a", timestamp=5_000) == []
    assert h.side_output("late") == [{"late": True}]


def test_sliding_windows_count_each_record_in_every_window():
    h = Harness("w-count", window=sliding(30, 10))
    for t in [0, 15, 29]:
        h.process(1, key="k", timestamp=t)
    fired = h.advance_watermark(1_000)
    assert [(w["start"], w["count"]) for w in fired] == [(-20, 1), (-10, 2), (0, 3), (10, 2), (20, 1)]


def test_sessions_merge_while_they_meet():
    h = Harness("w-list", window=session(100))
    for t, v in [(0, 1), (50, 2), (300, 3), (150, 4)]:
        h.process(v, key="u", timestamp=t)
    fired = h.advance_watermark(10_000)
    assert fired == [
        {"key": "u", "start": 0, "end": 250, "values": [1, 2, 4]},
        {"key": "u", "start": 300, "end": 400, "values": [3]},
    ]


def test_a_window_function_needs_a_window_and_event_time_needs_timestamps():
    with pytest.raises(weir.OperatorError, match="no `window`"):
        Harness("w-count")
    h = Harness("w-count", window=tumbling(10))
    with pytest.raises(weir.OperatorError, match="needs timestamps"):
        h.process(1, key="k")


def test_processing_time_windows_follow_the_clock():
    h = Harness("w-count", window=tumbling(1_000, processing_time=True))
    h.advance_processing_time(1_500)
    h.process(1, key="k", timestamp=99_999)
    h.process(2, key="k")
    assert h.advance_watermark(10**12) == []
    assert h.advance_processing_time(1_999) == [{"key": "k", "start": 1_000, "count": 2}]
