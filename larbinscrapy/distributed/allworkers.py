"""``AllWorkersControl``: pause, resume or stop every worker of a crawl, asked of any one.

The crawl-wide command lives in one Redis hash, ``<frontier key>:control`` (in the first
shard's slot): ``command`` (``pause``, ``resume`` or ``stop``) and ``serial``, bumped by each
``ask`` (one script: atomic). Every worker reads it in its heartbeat's round trip
(``Membership``: about once a second while it crawls, every ``IDLE_POLL_MAX`` s at most when
idle; no polling of its own) and applies a command newer than the last it applied, by sending
``signals.crawl_command`` (``PauseGate`` pauses, resumes or stops this worker).

A worker that joins notes the serial: a stop asked before it joined is not for it (starting
workers again is how a stopped crawl goes on), but it joins a paused crawl paused. A stop is
Ctrl-C's: what is in flight ends, each worker hands its leases back, and the queue, the seen
bits and the seeds stay in Redis.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from larbinscrapy.distributed.jobs import Call, LuaScript
from larbinscrapy.signals import crawl_command

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.distributed.link import FrontierLink

logger = logging.getLogger(__name__)

COMMANDS = ("pause", "resume", "stop")

_ASK = LuaScript(
    "redis.call('HSET', KEYS[1], 'command', ARGV[1])\n"
    "return redis.call('HINCRBY', KEYS[1], 'serial', 1)\n"
)


def _command(reply: list[Any]) -> tuple[str, int]:
    """``HMGET command serial`` -> (command, serial); ("", 0) before any ask."""
    command, serial = reply
    return (command or b"").decode(), int(serial or 0)


class AllWorkersControl:
    """The crawl-wide command of one worker (module docstring); ``frontier.AllWorkers``."""

    def __init__(self, link: FrontierLink, key: str, kept: str, send: Callable[..., Any]) -> None:
        self.link = link
        self.key = key
        self._kept = kept
        self._send = send  # the crawler's ``signals.send_catch_log``
        self._command = ""
        self.serial = 0  # the serial of the last command applied here (or seen at join)
        self.asking = 0  # our asks not yet answered: a read before their answer is older

    @property
    def command(self) -> str:
        return self._command

    @property
    def kept(self) -> str:
        return self._kept

    def read_call(self) -> Call:
        """The command and its serial: sent with each heartbeat."""
        return Call(("HMGET", self.key, "command", "serial"), _command)

    def joined(self, reply: tuple[str, int]) -> None:
        """The command as this worker joined: only a pause holds for it."""
        self._command, self.serial = reply
        if self._command == "pause":
            self._apply("pause", "the crawl was paused for every worker when this one joined")

    def read(self, reply: tuple[str, int]) -> None:
        """A heartbeat read the command: apply it if no worker here applied it yet."""
        command, serial = reply
        if self.asking or serial <= self.serial or command not in COMMANDS:
            return  # (the Redis thread is ordered: it was read before our ask was written)
        self._command, self.serial = command, serial
        self._apply(command, "another worker's status page, for every worker")

    def ask(self, command: str) -> None:
        """Write ``command`` for every worker, then apply it here at once."""
        if command not in COMMANDS:
            raise ValueError(f"not a command for every worker: {command!r}")
        self._command = command
        call = Call.script_call(_ASK, self.key, [command])
        self.asking += 1
        self.link.send("all workers", call, then=self._asked)  # before a stop closes the link
        self._apply(command, "the status page, for every worker")

    def _asked(self, serial: int) -> None:
        self.asking -= 1
        self.serial = max(self.serial, int(serial))  # our own: not applied again

    def _apply(self, command: str, source: str) -> None:
        self._send(crawl_command, command=command, source=source)
