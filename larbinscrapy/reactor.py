"""The installed Twisted reactor, typed for what larbinscrapy asks of it: mypy misreads Twisted's
zope interface, so ``installed_reactor()`` returns a ``Reactor`` Protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

from twisted.internet.threads import deferToThreadPool

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.internet.base import DelayedCall
    from twisted.internet.defer import Deferred
    from twisted.internet.protocol import ServerFactory
    from twisted.internet.tcp import Port
    from twisted.python.threadpool import ThreadPool

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Clock(Protocol):
    """A reactor's time: ``seconds()`` and ``callLater()``."""

    def seconds(self) -> float: ...

    def callLater(
        self, delay: float, callable: Callable[..., Any], *args: Any, **kw: Any
    ) -> DelayedCall: ...


class Reactor(Clock, Protocol):
    """The reactor calls larbinscrapy makes beyond time: shutdown hooks, threads, the resolver,
    the status page's port."""

    resolver: Any  # the installed name resolver (dns.py installs a PinnedResolver)

    def addSystemEventTrigger(
        self, phase: str, eventType: str, callable: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any: ...

    def callFromThread(self, callable: Callable[..., Any], *args: Any, **kw: Any) -> None: ...

    def getThreadPool(self) -> ThreadPool: ...

    def installResolver(self, resolver: Any) -> Any: ...

    def listenTCP(
        self, port: int, factory: ServerFactory, backlog: int = 50, interface: str = ""
    ) -> Port: ...


def installed_reactor() -> Reactor:
    """The reactor Scrapy installed (importing it installs the default one if none is)."""
    from twisted.internet import reactor

    return cast("Reactor", reactor)


def defer_to_pool(
    pool: ThreadPool, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs
) -> Deferred[_R]:
    """Run ``fn`` in ``pool``; its result fires the Deferred in the reactor thread."""
    from twisted.internet import reactor

    return deferToThreadPool(reactor, pool, fn, *args, **kwargs)
