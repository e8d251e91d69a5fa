"""``LeanSignalManager``: Scrapy's signals, each receiver's arguments learnt once, not every send.

Replaces: ``crawler.signals`` (``SignalManager``), swapped by the ``LeanSignals`` extension before
the engine, downloader and scraper keep it. Scrapy sends eight to ten signals a request and one an
item; pydispatch's ``robustApply`` reads each receiver's code at every send, and the async send
runs every receiver in its own task even when it returns a plain value. This one finds the
receivers pydispatch would at every send (its per-receiver checks redone only when its lists
change), learns a function's arguments once (by code object), calls receivers directly and
awaits only what they return that is awaitable. Results, log lines,
``dont_log`` and call order are Scrapy's (``tests/test_lean_signals.py``), but in an async send a
callable object's result, which Scrapy's loses to an ``AttributeError``.
Private names: none imported; the sources of the sends it mirrors are checked by digest.
Retire when: Scrapy sends a signal without a task a receiver and pydispatch caches arguments.

More in docs/modules.md (`larbinscrapy/lean/signals.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import suppress
from inspect import isawaitable
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any

from pydispatch import dispatcher
from pydispatch.dispatcher import WEAKREF_TYPES, getAllReceivers, liveReceivers
from pydispatch.robustapply import robustApply
from scrapy.exceptions import StopDownload
from scrapy.signalmanager import SignalManager
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.defer import ensure_awaitable
from scrapy.utils.python import global_object_name
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private

logger = logging.getLogger(__name__)

REQUIRES: tuple[Private, ...] = (
    ("scrapy.signalmanager", "SignalManager.send_catch_log", "81ac78d853fe"),
    ("scrapy.signalmanager", "SignalManager.send_catch_log_async", "5f57f8128f39"),
    ("scrapy.utils.signal", "send_catch_log", "fba12693d484"),
    ("scrapy.utils.signal", "send_catch_log_async", "1904d6b9cd7c"),
    ("scrapy.utils.signal", "_send_catch_log_asyncio", "44b735a92bb7"),
    ("pydispatch.robustapply", "robustApply", "76007a4efa40"),
    ("pydispatch.robustapply", "function", "53e742aae922"),
)

_CAUGHT = "Error caught on signal handler: %(receiver)s"  # Scrapy's words
_VARKEYWORDS = 0x08  # inspect.CO_VARKEYWORDS: the function takes **kwargs
_ANY = id(dispatcher.Any)  # receivers connected for any sender are under this key
_NONE: dict[Any, list[Any]] = {}


def _dont_log(named: dict[str, Any]) -> tuple[type[BaseException], ...]:
    dont_log = named.pop("dont_log", ())
    return tuple(dont_log) if isinstance(dont_log, Sequence) else (dont_log,)


class LeanSignalManager(SignalManager):
    """A ``SignalManager`` whose sends call receivers with the arguments they take, learnt once."""

    def __init__(self, sender: Any) -> None:
        super().__init__(sender)
        # id(code) -> (code, the keyword names it takes, or None for all): the code object is
        # kept, so its id is never reused by another while the entry lives.
        self._takes: dict[int, tuple[Any, frozenset[str] | None]] = {}
        # signal -> (pydispatch's entries for it from this manager's sender, those to call:
        # live, each once)
        self._found: dict[Any, tuple[list[Any], list[Any]]] = {}

    def _receivers(self, sender: Any, signal: Any) -> list[Any]:
        """``liveReceivers(getAllReceivers(sender, signal))``, in its order, without pydispatch's
        Python calls a receiver (its dead-reference and duplicate checks) while the four lists it
        reads hold the same entries as at the last send (compared by identity first).
        Another sender's receivers are found as pydispatch finds them."""
        if sender is not self.sender:
            return list(liveReceivers(getAllReceivers(sender, signal)))
        table = dispatcher.connections
        mine = table.get(id(sender)) or _NONE
        anyone = table.get(_ANY) or _NONE
        entries = [
            *mine.get(signal, ()),
            *mine.get(dispatcher.Any, ()),
            *anyone.get(signal, ()),
            *anyone.get(dispatcher.Any, ()),
        ]
        found = self._found.get(signal)
        if found is None or found[0] != entries:
            distinct: dict[Any, None] = {}
            for entry in entries:
                if entry:  # a dead method reference is false
                    with suppress(TypeError):  # a dead reference cannot be hashed
                        distinct.setdefault(entry)
            found = self._found[signal] = (entries, list(distinct))
        live = []
        for entry in found[1]:
            if isinstance(entry, WEAKREF_TYPES):
                receiver = entry()
                if receiver is not None:
                    live.append(receiver)
            else:
                live.append(entry)
        return live

    def _call(self, receiver: Any, named: dict[str, Any]) -> Any:
        """``robustApply(receiver, **named)``, with the receiver's argument names learnt once."""
        kind = type(receiver)
        if kind is MethodType:
            func, skip = receiver.__func__, 1
        elif kind is FunctionType:
            func, skip = receiver, 0
        else:  # a callable object, a partial...: as pydispatch does it, every time
            return robustApply(receiver, **named)
        code = getattr(func, "__code__", None)
        if code is None:
            return robustApply(receiver, **named)
        known = self._takes.get(id(code))
        if known is None or known[0] is not code:
            takes = (
                None
                if code.co_flags & _VARKEYWORDS
                else frozenset(code.co_varnames[skip : code.co_argcount])
            )
            known = self._takes[id(code)] = (code, takes)
        takes = known[1]
        if takes is None:
            return receiver(**named)
        return receiver(**{name: value for name, value in named.items() if name in takes})

    def send_catch_log(self, signal: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        """Scrapy's ``send_catch_log``: each receiver's result, or a ``Failure`` it raised."""
        sender = kwargs.pop("sender", self.sender)
        dont_log: tuple[type[BaseException], ...] = (*_dont_log(kwargs), StopDownload)
        spider = kwargs.get("spider")
        named = {"signal": signal, "sender": sender, **kwargs}
        responses: list[tuple[Any, Any]] = []
        for receiver in self._receivers(sender, signal):
            result: Any
            try:
                result = self._call(receiver, named)
                if isinstance(result, Deferred):
                    logger.error(
                        "Cannot return deferreds from signal handler: %(receiver)s",
                        {"receiver": receiver},
                        extra={"spider": spider},
                    )
            except dont_log:
                result = Failure()
            except Exception:
                result = Failure()
                logger.exception(_CAUGHT, {"receiver": receiver}, extra={"spider": spider})
            responses.append((receiver, result))
        return responses

    async def send_catch_log_async(self, signal: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        """Scrapy's ``send_catch_log_async``: a task only for a receiver that returned one."""
        if not is_asyncio_available():
            return await super().send_catch_log_async(signal, **kwargs)
        sender = kwargs.pop("sender", self.sender)
        dont_log = _dont_log(kwargs)
        spider = kwargs.get("spider")
        named = {"signal": signal, "sender": sender, **kwargs}
        responses: list[tuple[Any, Any]] = []
        waits: dict[int, Awaitable[Any]] = {}
        # listed before any is called, as Scrapy's: a receiver may disconnect itself (wait_for)
        for receiver in self._receivers(sender, signal):
            result: Any
            try:
                result = self._call(receiver, named)
            except dont_log as exc:
                result = exc
            except Exception as exc:
                logger.exception(_CAUGHT, {"receiver": receiver}, extra={"spider": spider})
                result = exc
            else:
                if isinstance(result, Deferred) or isawaitable(result):
                    waits[len(responses)] = ensure_awaitable(
                        result, _warn=global_object_name(receiver)
                    )
            responses.append((receiver, result))
        if waits:
            done = await asyncio.gather(
                *(
                    self._settle(responses[index][0], wait, dont_log, spider)
                    for index, wait in waits.items()
                )
            )
            for index, result in zip(waits, done, strict=True):
                responses[index] = (responses[index][0], result)
        return responses

    async def _settle(
        self,
        receiver: Any,
        wait: Awaitable[Any],
        dont_log: tuple[type[BaseException], ...],
        spider: Any,
    ) -> Any:
        """What the awaitable a receiver returned comes to; its exception, logged as Scrapy does."""
        try:
            return await wait
        except dont_log as exc:
            return exc
        except Exception as exc:
            logger.exception(_CAUGHT, {"receiver": receiver}, extra={"spider": spider})
            return exc


class LeanSignals:
    """Extension: makes ``crawler.signals`` a ``LeanSignalManager`` before the engine is built.

    Receivers connected earlier (the spider's, the add-ons') live in pydispatch's tables, keyed by
    the crawler, so the new manager sends to them as well.
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeanSignals:
        if type(crawler.signals) is SignalManager:
            crawler.signals = LeanSignalManager(crawler.signals.sender)
        return cls()
