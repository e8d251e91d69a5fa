"""Signals larbinscrapy components send to each other (Scrapy signals are plain objects)."""

from __future__ import annotations

#: A request's work is over: its response was parsed and every request it produced was
#: queued, or it failed for good. Arguments: ``request``. The scheduler acknowledges the
#: request's frontier record then, so a crash before that point re-queues it.
request_done = object()
