"""The deterministic multi-host test web: a pure model (``testweb.web``), a twisted.web server
that serves it on loopback IPs (``python -m testweb``) and a harness that starts it for tests.

The model and the server come from one ``build_web(name, port)``, so the oracle a test asserts
against (``Web.ground_truth``) describes exactly the bytes the crawler was served.
"""

from __future__ import annotations

from testweb.web import Page, Web, build_web

__all__ = ["Page", "Web", "build_web"]
