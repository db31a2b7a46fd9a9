from weir.testing import Harness

import {module}  # noqa: F401  (registers the operators)


def test_splits_and_counts():
    assert Harness("split-words").process("The fox, the dog") == ["the", "fox", "the", "dog"]
    h = Harness("count", msgpack=True)
    h.process("the", key="the")
    assert h.process("the", key="the") == [{"word": "the", "count": 2}]
