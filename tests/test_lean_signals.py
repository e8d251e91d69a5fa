"""``LeanSignalManager`` sends as Scrapy's ``SignalManager`` does: each case through both.

Same receivers, same sender, the same send on each manager: the receivers called, with the
arguments, in the order, the results (values, ``Failure``s, exceptions) and the log lines must
be the same, for receivers of every shape pydispatch accepts (functions, bound methods, callable
objects, ``**kwargs``, keyword-only), connected through the manager or through pydispatch
itself, and receivers that disconnect or die between sends.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from typing import Any

import pytest
from pydispatch import dispatcher
from scrapy.exceptions import StopDownload
from scrapy.signalmanager import SignalManager
from twisted.internet.defer import succeed
from twisted.python.failure import Failure

from larbinscrapy.lean.signals import LeanSignalManager, LeanSignals

SIGNAL = object()
OTHER = object()


class Sender:
    """A crawler stands here: the key of the receivers in pydispatch's tables."""


class Recorder:
    """Receivers of every shape; each call recorded with the arguments it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def method(self, request, spider=None):
        self.calls.append(("method", {"request": request, "spider": spider}))
        return "m"

    def everything(self, **kwargs):
        kwargs["sender"] = type(kwargs["sender"]).__name__  # a Sender, new for each manager
        kwargs["signal"] = kwargs["signal"] is SIGNAL
        self.calls.append(("everything", kwargs))
        return "e"

    def keyword_only(self, request, *, spider=None):
        self.calls.append(("keyword_only", {"request": request, "spider": spider}))
        return "k"

    def failing(self, request):
        self.calls.append(("failing", {"request": request}))
        raise ValueError("boom")

    def stopping(self, request):
        self.calls.append(("stopping", {"request": request}))
        raise StopDownload(fail=False)

    def deferred(self, request):
        self.calls.append(("deferred", {"request": request}))
        return succeed("d")

    async def coroutine(self, request):
        self.calls.append(("coroutine", {"request": request}))
        await asyncio.sleep(0)
        return "c"

    async def coroutine_failing(self, request):
        self.calls.append(("coroutine_failing", {"request": request}))
        await asyncio.sleep(0)
        raise KeyError("late")

    def __call__(self, request, signal):
        self.calls.append(("__call__", {"request": request, "signal": signal is SIGNAL}))
        return "o"


def _plain(request, sender=None):
    _plain.calls.append(("plain", {"request": request, "sender": type(sender).__name__}))  # type: ignore[attr-defined]
    return "p"


def _partial_target(request, extra):
    return extra


def _run(coro: Any) -> Any:
    """Run ``coro`` on the reactor's loop (``asyncio.run`` would leave the thread without one)."""
    return asyncio.get_event_loop().run_until_complete(coro)


def _shape(results: list[tuple[Any, Any]]) -> list[tuple[str, Any]]:
    """Results comparable across the two runs: the receiver's name, the value or its error."""
    out = []
    for receiver, result in results:
        name = getattr(receiver, "__name__", type(receiver).__name__)
        if isinstance(result, Failure):
            out.append((name, ("failure", type(result.value).__name__, str(result.value))))
        elif isinstance(result, BaseException):
            out.append((name, ("error", type(result).__name__, str(result))))
        else:
            out.append(
                (name, ("value", type(result).__name__ if not isinstance(result, str) else result))
            )
    return out


def _connect_all(manager: SignalManager, rec: Recorder, names: list[str]) -> list[Any]:
    receivers = []
    for name in names:
        receiver: Any = {
            "plain": _plain,
            "object": rec,
            "partial": functools.partial(_partial_target, extra="x"),
        }.get(name) or getattr(rec, name)
        receivers.append(receiver)
        manager.connect(receiver, SIGNAL)
    return receivers


def _both(names: list[str], send, caplog) -> list[tuple[Any, Any, Any]]:
    """Run ``send(manager)`` on Scrapy's manager and on ours: (results, calls, log) of each."""
    runs = []
    for cls in (SignalManager, LeanSignalManager):
        sender = Sender()
        manager = cls(sender)
        rec = Recorder()
        _plain.calls = []  # type: ignore[attr-defined]
        receivers = _connect_all(manager, rec, names)
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            results = send(manager)
        log = [
            (r.levelname, r.getMessage().split(":")[0], bool(r.exc_info)) for r in caplog.records
        ]
        runs.append((_shape(results), rec.calls + _plain.calls, log))  # type: ignore[attr-defined]
        for receiver in receivers:
            manager.disconnect(receiver, SIGNAL)
    return runs


SYNC_SHAPES = ["method", "everything", "keyword_only", "plain", "object", "failing", "stopping"]


def test_send_catch_log_calls_results_and_log_are_scrapys(caplog):
    def send(manager):
        return manager.send_catch_log(SIGNAL, request="r", spider="s", response="ignored")

    scrapys, ours = _both(SYNC_SHAPES, send, caplog)
    assert ours == scrapys
    results, calls, log = ours
    assert [name for name, _ in results] == [
        *SYNC_SHAPES[:3],
        "_plain",
        "Recorder",
        *SYNC_SHAPES[5:],
    ]
    assert ("method", {"request": "r", "spider": "s"}) in calls
    assert ("keyword_only", {"request": "r", "spider": None}) in calls  # robustApply's rule
    everything = {"request": "r", "spider": "s", "response": "ignored", "signal": True}
    assert ("everything", {**everything, "sender": "Sender"}) in calls
    assert log == [("ERROR", "Error caught on signal handler", True)]  # StopDownload not logged


def test_dont_log_and_a_returned_deferred_as_scrapy(caplog):
    def send(manager):
        return manager.send_catch_log(SIGNAL, request="r", dont_log=ValueError)

    scrapys, ours = _both(["failing", "deferred", "method"], send, caplog)
    assert ours == scrapys
    assert ours[2] == [("ERROR", "Cannot return deferreds from signal handler", False)]


def test_a_receiver_pydispatch_cannot_call_fails_as_in_scrapy(caplog):
    def send(manager):
        return manager.send_catch_log(SIGNAL, request="r")

    scrapys, ours = _both(["partial", "method"], send, caplog)
    assert ours == scrapys
    assert ours[0][0] == ("partial", ("failure", "ValueError", ours[0][0][1][2]))


def test_send_catch_log_async_as_scrapy(caplog):
    def send(manager):
        return _run(manager.send_catch_log_async(SIGNAL, request="r", spider="s"))

    names = ["method", "coroutine", "failing", "coroutine_failing", "everything"]
    scrapys, ours = _both(names, send, caplog)
    # Scrapy's runs each receiver in a task, so a coroutine's body starts before the next call
    assert sorted(ours[1], key=repr) == sorted(scrapys[1], key=repr)
    assert ours[0] == scrapys[0] and ours[2] == scrapys[2]
    assert dict(ours[0])["coroutine"] == ("value", "c")
    assert dict(ours[0])["coroutine_failing"] == ("error", "KeyError", "'late'")
    assert [line for line in ours[2] if line[0] == "ERROR"] == [
        ("ERROR", "Error caught on signal handler", True)
    ] * 2


def test_async_dont_log_returns_the_exception_unlogged(caplog):
    def send(manager):
        return _run(
            manager.send_catch_log_async(SIGNAL, request="r", dont_log=(ValueError, KeyError))
        )

    scrapys, ours = _both(["failing", "coroutine_failing", "method"], send, caplog)
    assert ours[0] == scrapys[0] and sorted(ours[1], key=repr) == sorted(scrapys[1], key=repr)
    assert ours[2] == scrapys[2] == []


def test_async_a_callable_object_is_called_where_scrapy_fails_to_name_it(caplog):
    """The one difference: Scrapy's async send formats every receiver's name after calling it,
    and a callable object has no ``__qualname__``, so its result is lost to an AttributeError;
    ours names only a receiver that returned an awaitable, and keeps the object's result."""

    def send(manager):
        return _run(manager.send_catch_log_async(SIGNAL, request="r"))

    scrapys, ours = _both(["object", "method"], send, caplog)
    assert scrapys[0][0] == ("Recorder", ("error", "AttributeError", scrapys[0][0][1][2]))
    assert ours[0] == [("Recorder", ("value", "o")), ("method", ("value", "m"))]
    assert (
        ours[1]
        == scrapys[1]
        == [
            ("__call__", {"request": "r", "signal": True}),
            ("method", {"request": "r", "spider": None}),
        ]
    )
    assert scrapys[2] == [("ERROR", "Error caught on signal handler", True)]
    assert ours[2] == []


def test_receivers_connected_through_pydispatch_or_for_any_signal_are_sent_to():
    sender = Sender()
    manager = LeanSignalManager(sender)
    rec = Recorder()
    dispatcher.connect(rec.method, SIGNAL, sender=sender)  # not through the manager
    dispatcher.connect(rec.everything, dispatcher.Any, sender=sender)
    results = manager.send_catch_log(SIGNAL, request="r")
    assert [v for _, v in results] == ["m", "e"]
    assert manager.send_catch_log(OTHER, request="r") == [(rec.everything, "e")]
    dispatcher.disconnect(rec.method, SIGNAL, sender=sender)
    dispatcher.disconnect(rec.everything, dispatcher.Any, sender=sender)
    assert manager.send_catch_log(SIGNAL, request="r") == []


def test_a_receiver_disconnected_or_gone_is_no_longer_sent_to():
    manager = LeanSignalManager(Sender())
    rec, gone = Recorder(), Recorder()
    manager.connect(rec.method, SIGNAL)
    manager.connect(gone.method, SIGNAL)
    assert len(manager.send_catch_log(SIGNAL, request="r")) == 2
    del gone
    gc.collect()
    assert [v for _, v in manager.send_catch_log(SIGNAL, request="r")] == ["m"]
    manager.disconnect(rec.method, SIGNAL)
    manager.connect(rec.everything, SIGNAL)
    assert [v for _, v in manager.send_catch_log(SIGNAL, request="r")] == ["e"]


@pytest.mark.parametrize("cls", [SignalManager, LeanSignalManager])
def test_each_send_reaches_the_receivers_connected_at_that_moment(cls):
    """Receivers swapped between sends, through pydispatch itself and with the same count (the
    list of receivers changes in place), one for any sender, one connected twice: every send
    reaches exactly those connected then, each once, in pydispatch's order."""
    sender = Sender()
    manager = cls(sender)
    first, second, anyone = Recorder(), Recorder(), Recorder()
    manager.connect(first.method, SIGNAL)
    dispatcher.connect(anyone.keyword_only, SIGNAL, sender=dispatcher.Any)
    dispatcher.connect(first.method, SIGNAL, sender=dispatcher.Any)  # again, for any sender
    try:
        sent = [[v for _, v in manager.send_catch_log(SIGNAL, request=n)] for n in range(2)]
        dispatcher.disconnect(first.method, SIGNAL, sender=sender)
        dispatcher.connect(second.everything, SIGNAL, sender=sender)  # same length, new entry
        sent.append([v for _, v in manager.send_catch_log(SIGNAL, request=2)])
        dispatcher.disconnect(anyone.keyword_only, SIGNAL, sender=dispatcher.Any)
        sent.append([v for _, v in _run(manager.send_catch_log_async(SIGNAL, request=3))])
    finally:
        dispatcher.disconnect(first.method, SIGNAL, sender=dispatcher.Any)
        dispatcher.disconnect(second.everything, SIGNAL, sender=sender)
    assert sent == [["m", "k"], ["m", "k"], ["e", "k", "m"], ["e", "m"]]
    assert [c[1]["request"] for c in first.calls] == [0, 1, 2, 3]
    assert [c[1]["request"] for c in second.calls] == [2, 3]
    assert [c[1]["request"] for c in anyone.calls] == [0, 1, 2]


def test_two_closures_of_one_def_and_a_redefined_function_each_get_their_own_arguments():
    manager = LeanSignalManager(Sender())
    seen: list[Any] = []

    def make(tag):
        def receiver(request):
            seen.append((tag, request))

        return receiver

    first, second = make(1), make(2)
    for receiver in (first, second):
        manager.connect(receiver, SIGNAL)
    manager.send_catch_log(SIGNAL, request="r", spider="s")
    assert seen == [(1, "r"), (2, "r")]
    for receiver in (first, second):
        manager.disconnect(receiver, SIGNAL)

    namespace: dict[str, Any] = {}
    for source in ("def f(request): return request", "def f(spider): return spider"):
        exec(source, namespace)  # a new code object, perhaps where a freed one was
        manager.connect(namespace["f"], SIGNAL)
        assert [v for _, v in manager.send_catch_log(SIGNAL, request="r", spider="s")] == [
            "r" if "request" in source else "s"
        ]
        manager.disconnect(namespace["f"], SIGNAL)


def test_the_extension_swaps_the_crawlers_manager_and_keeps_earlier_receivers():
    class Crawler:
        pass

    crawler: Any = Crawler()
    crawler.signals = SignalManager(crawler)
    rec = Recorder()
    crawler.signals.connect(rec.method, SIGNAL)  # as the spider does before the extensions
    LeanSignals.from_crawler(crawler)
    assert type(crawler.signals) is LeanSignalManager
    assert crawler.signals.sender is crawler
    assert [v for _, v in crawler.signals.send_catch_log(SIGNAL, request="r")] == ["m"]
    ours = crawler.signals
    LeanSignals.from_crawler(crawler)
    assert crawler.signals is ours  # once
    crawler.signals.disconnect(rec.method, SIGNAL)


def test_a_users_own_manager_is_left_alone():
    class Mine(SignalManager):
        pass

    class Crawler:
        pass

    crawler: Any = Crawler()
    crawler.signals = Mine(crawler)
    LeanSignals.from_crawler(crawler)
    assert type(crawler.signals) is Mine


@pytest.mark.parametrize("cls", [SignalManager, LeanSignalManager])
def test_an_async_receiver_returning_a_deferred_is_warned_about_on_both(cls):
    from scrapy.exceptions import ScrapyDeprecationWarning

    manager = cls(Sender())
    rec = Recorder()
    manager.connect(rec.deferred, SIGNAL)
    with pytest.warns(ScrapyDeprecationWarning, match="returned a Deferred"):
        results = _run(manager.send_catch_log_async(SIGNAL, request="r"))
    assert [v for _, v in results] == ["d"]
    manager.disconnect(rec.deferred, SIGNAL)


@pytest.mark.parametrize("cls", [SignalManager, LeanSignalManager])
def test_an_async_receiver_that_disconnects_itself_does_not_skip_the_next(cls):
    """``SignalManager.wait_for``'s receiver disconnects itself when called: the receiver after
    it in the table is still called, as Scrapy's async send lists them all before calling any."""
    manager = cls(Sender())
    rec = Recorder()

    def once(request):
        manager.disconnect(once, SIGNAL)
        return "once"

    manager.connect(once, SIGNAL)
    manager.connect(rec.method, SIGNAL)
    results = _run(manager.send_catch_log_async(SIGNAL, request="r"))
    assert [v for _, v in results] == ["once", "m"]
    assert rec.calls == [("method", {"request": "r", "spider": None})]
    manager.disconnect(rec.method, SIGNAL)
