"""Signals larbinscrapy components send to each other (Scrapy signals are plain objects)."""

from __future__ import annotations

#: A request's work is over: its response was parsed, or it failed for good. Arguments:
#: ``request``, ``children``: how many requests the page produced (0 for a failure), each
#: marked with ``meta.PARENT``, and ``items``: how many items it yielded. The scheduler
#: acknowledges the request's frontier record once that many children reached
#: ``enqueue_request`` and, with item receipts (``pipelines/receipts.py``), that many items are
#: stored (``PendingPages``), so a crash before re-queues it.
request_done = object()

#: A command for every worker of the crawl (the status page's "all workers" buttons, read
#: from the shared frontier by each worker's heartbeat): ``command`` is ``pause``, ``resume``
#: or ``stop``, ``source`` says who asked (for the log). ``PauseGate`` applies it.
crawl_command = object()
