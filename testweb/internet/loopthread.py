"""Servers on their own asyncio loop in a background thread, so tests in any reactor (or none)
can start them, read their bound ports, and stop them."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from types import TracebackType


class LoopThread:
    """Runs ``_serve()`` then the loop until ``stop()``; ``_close()`` after. An error while
    starting is raised by ``start()`` in the caller's thread."""

    name = "loop"
    start_timeout = 30.0

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    async def _serve(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # handed to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self._close()
        self.loop.close()

    def start(self) -> Self:
        self._thread.start()
        self._ready.wait(self.start_timeout)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
