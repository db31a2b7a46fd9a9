import re

import pytest

import weir
from weir.testing import Harness


@weir.map("t-double")
def double(n):
    return n * 2


@weir.flat_map("t-split")
def split(line):
    return re.findall(r"\w+", line.lower())


@weir.filter("t-even")
def even(n):
    return n % 2 == 0


@weir.timestamps("t-ts")
def ts(record):
    return record["t"]


@weir.process("t-route")
class Route(weir.Process):
    def open(self, ctx):
        self.limit = ctx.required_param("limit", int)

    def process(self, n, ctx):
        if n > self.limit:
            ctx.emit_side("big", n)
        else:
            ctx.emit(n)


@weir.map("t-fails")
def fails(record):
    return record["missing"]


def test_stateless_kinds():
    assert Harness("t-double").process(21) == [42]
    assert Harness(double).process(1.5) == [3.0]
    assert Harness("t-split").process("To be, or NOT") == ["to", "be", "or", "not"]
    h = Harness("t-even")
    assert h.process(4) == [4] and h.process(3) == []


def test_a_filter_and_a_timestamp_assigner_pass_records_on_unchanged():
    h = Harness("t-ts", msgpack=True)
    assert h.process({"t": 1234, "v": "x"}) == [{"t": 1234, "v": "x"}]
    assert h.last_timestamps == [1234]
    with pytest.raises(weir.OperatorError, match="an int of ms"):
        h.process({"t": "soon"})


def test_a_process_with_parameters_and_side_outputs():
    h = Harness("t-route", params={"limit": "10"})
    assert h.process(50) == []
    assert h.process(5) == [5]
    assert h.side_output("big") == [50]
    with pytest.raises(weir.OperatorError, match="failed to open: ValueError: missing parameter `limit`"):
        Harness("t-route")


def test_an_exception_names_the_operator_and_carries_the_traceback():
    with pytest.raises(weir.OperatorError) as e:
        Harness("t-fails").process({"present": 1})
    text = str(e.value)
    assert text.startswith("operator `t-fails`: KeyError: 'missing'")
    assert "Traceback" in text and "test_operators.py" in text and 'record["missing"]' in text
    # The SDK's own frames are left out.
    assert "_driver.py" not in text


def test_an_unknown_operator_and_bad_decorations_are_clear_errors():
    with pytest.raises(weir.OperatorError, match="no operator named `nope`"):
        Harness("nope")
    with pytest.raises(TypeError, match="name"):
        weir.map(lambda x: x)
    with pytest.raises(TypeError, match="subclass of weir.KeyedProcess"):
        weir.keyed_process("t-bad")(object)
    with pytest.raises(ValueError, match="two operators are named `t-double`"):
        weir.map("t-double")(lambda x: x)


def test_returning_a_string_from_a_flat_map_is_an_error_not_characters():
    @weir.flat_map("t-returns-str")
    def bad(line):
        return line

    with pytest.raises(weir.OperatorError, match="returned a str"):
        Harness("t-returns-str").process("abc")


def test_a_failed_call_emits_nothing():
    @weir.flat_map("t-half")
    def half(n):
        yield n
        if n == 1:
            raise ValueError("after one output")

    h = Harness("t-half")
    with pytest.raises(weir.OperatorError, match="after one output"):
        h.process(1)
    # The failed call's output was discarded, not handed on with the next.
    assert h.process(2) == [2]
