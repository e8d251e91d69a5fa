"""The flat table of 64-bit keys and values (seen/flat.py) against a dict doing the same."""

from __future__ import annotations

import random

from larbinscrapy.seen.flat import U64Table


def test_the_table_agrees_with_a_dict_through_sets_removals_and_growth():
    rng = random.Random(7)
    table, model = U64Table(capacity=8), {}
    keys = [rng.getrandbits(64) for _ in range(3000)] + [2, 3, 2**64 - 1]
    for step in range(60_000):
        key = rng.choice(keys)
        op = rng.random()
        if op < 0.55:
            value = rng.getrandbits(64)
            table.set(key, value)
            model[key] = value
        elif op < 0.8:
            table.pop(key)
            model.pop(key, None)
        else:
            assert table.get(key) == model.get(key), step
        assert len(table) == len(model)
    assert all(table.get(k) == v for k, v in model.items())
    assert all(table.get(k) is None for k in set(keys) - set(model))


def test_removed_slots_are_reused_and_do_not_grow_the_table():
    table = U64Table(capacity=1024)
    for round_ in range(50):  # a page's content changing on every revisit: set, then removed
        for k in range(300):
            table.set(10_000 * round_ + k + 5, k)
        for k in range(300):
            table.pop(10_000 * round_ + k + 5)
    assert len(table) == 0 and len(table._keys) == 1024
