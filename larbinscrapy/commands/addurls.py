"""``scrapy addurls``: add URLs to a running crawl (larbin's inputPort) through its status page."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from larbinscrapy.status.auth import read_job_files

if TYPE_CHECKING:
    import argparse


class NotRunning(Exception):
    """The crawl named by ``--jobdir`` is not running: its status page files are absent."""


def target(opts: argparse.Namespace, jobdir: str | None, token_setting: str) -> tuple[str, str]:
    """(base URL, token) of the crawl to post to; UsageError with what to pass otherwise."""
    if opts.url:
        parts = urlsplit(opts.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--url takes the status page's address, got {opts.url!r}")
        fragment = dict(p.partition("=")[::2] for p in parts.fragment.split("&") if p)
        token = opts.token or token_setting or fragment.get("token", "")
        if not token:
            raise UsageError(
                "no token: pass --token, set LARBIN_STATUS_TOKEN, or pass the "
                "logged URL with its #token=..."
            )
        return f"{parts.scheme}://{parts.netloc}", token
    if not jobdir:
        raise UsageError("which crawl? pass --jobdir DIR (the crawl's JOBDIR) or --url URL")
    try:
        token, address = read_job_files(jobdir)
    except OSError as exc:
        raise NotRunning(
            f"addurls: no crawl is running with JOBDIR {jobdir} (a running crawl "
            f"writes its status page's address there; {exc.strerror}: "
            f"{exc.filename})"
        ) from None
    return address, opts.token or token


def post(base: str, token: str, payload: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base}/api/urls",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    # No proxy: the status page is the crawl's own, an http_proxy meant for crawling is not for it.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout) as response:
        return json.loads(response.read())


class Command(ScrapyCommand):
    """``scrapy addurls``: see the module docstring."""

    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "URL... [--priority] [--depth N] [--jobdir DIR | --url URL]"

    def short_desc(self) -> str:
        return "Add URLs to a running larbin crawl (through its status page)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--priority", action="store_true", help="queue in the priority tier")
        parser.add_argument(
            "--depth",
            type=int,
            default=None,
            metavar="N",
            help="links to follow inside each URL's site (default: as a seed)",
        )
        parser.add_argument("--jobdir", metavar="DIR", help="the running crawl's JOBDIR")
        parser.add_argument("--url", metavar="URL", help="the status page's address")
        parser.add_argument("--token", metavar="TOKEN", help="the status page's token")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("no URL given")
        if opts.depth is not None and opts.depth < 0:
            raise UsageError("--depth takes a non-negative integer")
        settings = self.settings
        assert settings is not None  # set by scrapy.cmdline
        try:
            base, token = target(
                opts,
                opts.jobdir or settings.get("JOBDIR"),
                settings.get("LARBIN_STATUS_TOKEN") or "",
            )
        except NotRunning as exc:
            print(exc)
            self.exitcode = 1
            return
        payload: dict[str, Any] = {"urls": args, "priority": opts.priority}
        if opts.depth is not None:
            payload["depth"] = opts.depth
        try:
            answer = post(base, token, payload)
        except urllib.error.HTTPError as exc:
            print(f"addurls: {base} answered {exc.code}: {_error_text(exc)}")
            self.exitcode = 1
            return
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            print(f"addurls: cannot reach the crawl at {base} ({reason}); is it running?")
            self.exitcode = 1
            return
        print(
            f"queued {answer['queued']}, already seen {answer['seen']}, refused {answer['refused']}"
        )
        for refusal in answer["refusals"]:
            print(f"  refused {refusal['url']}: {refusal['reason']}")
        if answer["refused"] and not answer["queued"] and not answer["seen"]:
            self.exitcode = 2


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("error", exc.reason))
    except (ValueError, AttributeError):
        return str(exc.reason)
