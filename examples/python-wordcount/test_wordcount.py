from weir.testing import Harness

import wordcount  # noqa: F401  (registers the operators)


def test_splits_on_everything_but_letters_and_digits_and_lowercases():
    h = Harness("split-words")
    assert h.process("Hello, wörld! It's 2024 — snake_case") == [
        "hello", "wörld", "it", "s", "2024", "snake", "case"
    ]
    assert h.process("") == []


def test_counts_per_word():
    h = Harness("count", msgpack=True)
    assert h.process("a", key="a") == [{"word": "a", "count": 1}]
    assert h.process("b", key="b") == [{"word": "b", "count": 1}]
    assert h.process("a", key="a") == [{"word": "a", "count": 2}]
