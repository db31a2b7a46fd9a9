from weir.testing import Harness

import totals  # noqa: F401  (registers the operator)


def test_totals_add_up_per_user():
    h = Harness("running-total", msgpack=True)
    buy = lambda user, sku, amount: {"user": user, "sku": sku, "amount": amount}  # noqa: E731
    assert h.process(buy("ann", "tea", 900), key="ann") == [
        {"user": "ann", "spent": 900, "purchases": 1, "last": "tea"}
    ]
    h.process(buy("bob", "pen", 150), key="bob")
    assert h.process(buy("ann", "cup", 1200), key="ann") == [
        {"user": "ann", "spent": 2100, "purchases": 2, "last": "cup"}
    ]
