"""``AllWorkersControl``'s rules without Redis (which command read with a heartbeat a worker
applies; the crawl tests in ``test_status_allworkers.py`` run it against real Redis), and what
a stop line says is kept."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from larbinscrapy.distributed.allworkers import AllWorkersControl
from larbinscrapy.middlewares.pause import PauseGate
from larbinscrapy.signals import crawl_command


class _Link:
    """Records what ``ask`` sends; the test answers it (the Redis thread's reply)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []

    def send(self, what: str, call: Any, then: Any = None) -> None:
        self.sent.append((call, then))


def _control() -> tuple[AllWorkersControl, _Link, list[str]]:
    applied: list[str] = []

    def send(signal: object, command: str, source: str) -> None:
        assert signal is crawl_command
        applied.append(command)

    link = _Link()
    return AllWorkersControl(link, "P:control", "kept", send), link, applied  # type: ignore[arg-type]


def test_a_newer_command_is_applied_once() -> None:
    control, _, applied = _control()
    control.joined(("", 0))
    control.read(("pause", 1))
    control.read(("pause", 1))  # the next heartbeat reads it again
    control.read(("resume", 2))
    assert applied == ["pause", "resume"]
    assert control.command == "resume"


def test_a_joining_worker_keeps_a_pause_but_not_an_old_stop() -> None:
    control, _, applied = _control()
    control.joined(("stop", 7))  # the crawl was stopped, and is started again
    control.read(("stop", 7))
    assert applied == []
    paused, _, applied = _control()
    paused.joined(("pause", 3))
    assert applied == ["pause"]


def test_what_was_read_before_our_ask_was_written_is_older() -> None:
    control, link, applied = _control()
    control.joined(("resume", 5))
    control.ask("pause")  # applied here at once, then written
    control.read(("resume", 6))  # another worker's, read before our write: older than ours
    ((call, then),) = link.sent
    assert call.args[0] == "EVALSHA" and call.args[3] == "P:control"
    then(7)  # our write's serial
    control.read(("pause", 7))
    assert applied == ["pause"]
    assert control.command == "pause" and control.serial == 7


def test_only_the_three_commands() -> None:
    control, _, applied = _control()
    with pytest.raises(ValueError, match="every worker"):
        control.ask("reboot")
    control.read(("reboot", 9))
    assert applied == []


@pytest.mark.parametrize(
    ("jobdir", "said"),
    [("job", "resumable with the same JOBDIR"), ("", "no JOBDIR: its queue is not kept")],
)
def test_the_stop_line_of_a_local_crawl_says_what_is_kept(jobdir: str, said: str) -> None:
    gate = PauseGate.from_crawler(get_crawler(settings_dict={"JOBDIR": jobdir}))
    assert said in gate.where_kept()
