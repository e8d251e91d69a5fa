"""larbin's httpPort and inputPort: a live status page, a control API and Prometheus metrics.

``StatusServer`` (``extension.py``, in ``EXTENSIONS``) serves, on ``LARBIN_HTTP_HOST`` and the
first free port of ``LARBIN_HTTP_PORT``: ``GET /`` (the page, ``assets/``), ``GET /api/status``,
``GET /api/history``, ``POST /api/urls`` (larbin's inputPort), ``POST /api/pause|resume|stop``
and ``GET /metrics``, every one behind the token (``auth.py``). ``PauseGate`` (``gate.py``, a
downloader middleware) holds requests while paused; ``CrawlLogLine`` (``logline.py``) replaces
Scrapy's LogStats line. The command ``scrapy addurls`` (``larbinscrapy/commands/``) is the client.
"""
