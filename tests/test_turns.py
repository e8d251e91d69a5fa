"""``Turns``: sitemap files wait for their IP before the downloader, one per IP, a few in all."""

from __future__ import annotations

from larbinscrapy.seeds.turns import Turns


def test_one_turn_per_ip_and_at_most_so_many_in_all():
    turns = Turns(2)
    got: list[str] = []
    for key, name in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1"), ("a", "a3")):
        turns.take(key).addCallback(lambda _, n=name: got.append(n))
    assert got == ["a1", "b1"] and turns.running == 2  # a2 waits for a, c1 for room
    assert turns.waiting == 3
    turns.give("b")  # room: the first key that became free with a waiter (c)
    assert got == ["a1", "b1", "c1"]
    turns.give("a")  # a's next, in arrival order
    assert got == ["a1", "b1", "c1", "a2"]
    turns.give("c")
    turns.give("a")
    assert got == ["a1", "b1", "c1", "a2", "a3"] and turns.running == 1
    turns.give("a")
    assert turns.running == 0 and turns.waiting == 0
    turns.take("a").addCallback(lambda _: got.append("a4"))  # nothing held: at once
    assert got[-1] == "a4"
