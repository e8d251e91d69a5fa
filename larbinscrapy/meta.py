"""The request-meta protocol: every ``larbin_*`` key, who sets it, what it means."""

from __future__ import annotations

from typing import Any

# -- set by the link gate / the spider (travel with the queued request) ------------------------
ADMITTED = "larbin_admitted"  # the URL the gate already marked seen (dupefilter skips the test)
SITE_DEPTH = "larbin_site_depth"  # larbin depthInSite: links followed inside this site
REFERER = "larbin_referer"  # the page that linked here (for the item)
PRIORITY = "larbin_priority"  # queue in the priority tier (injected URLs, specificSearch)
PARENT = "larbin_parent"  # the scheduler record of the page that produced this request
HELD = "larbin_held"  # its seen bit is held off the disk until the frontier has it (SeenSet.hold)
REQUEUED = "larbin_requeued"  # given back by the politeness gate: queued again, no seen test
OUTPUT_DONE = "larbin_output_done"  # on a response: its page's output was counted once
ANY_TYPE = "larbin_any_type"  # download whatever the Content-Type (larbin checkType off for it)
# set by the robots.txt middleware on a page its site's rules were read for and allowed
ROBOTS_CHECKED = "larbin_robots_checked"  # [its URL, its rules' end (wall clock)]: no new check

# -- revisits (larbinscrapy/revisit/) and sitemaps (larbinscrapy/seeds/sitemaps.py) ---------------
REVISIT = "larbin_revisit"  # a due page re-entering the frontier: its packed schedule entry, hex
REVISIT_HINT = "larbin_revisit_hint"  # seconds between fetches a sitemap entry suggests
FETCH_COUNT = "larbin_fetch_count"  # on a response: fetches of this page, this one included
CHANGED = "larbin_changed"  # on a response: the content changed since the last fetch (first: True)
HANDLE_HTTPSTATUS_LIST = "handle_httpstatus_list"  # Scrapy's: statuses the spider is given (304)
PROXY = "proxy"  # Scrapy's: the proxy URL of a request (HttpProxyMiddleware, or the user's)
DOWNLOAD_MAXSIZE = "download_maxsize"  # Scrapy's: per-request body cap (sitemaps: 50 MB)
RETRY_TIMES = "retry_times"  # Scrapy's: retries of this request so far (RetryMiddleware)
DONT_RETRY = "dont_retry"  # Scrapy's: RetryMiddleware leaves this request alone (robots.txt)

# -- set by the frontier codec only inside a stored record ------------------------------------
DONT_FILTER = "larbin_dont_filter"  # Request.dont_filter, kept through the codec
CB_KWARGS = "larbin_cb_kwargs"  # Request.cb_kwargs, kept through the codec
FLAGS = "larbin_flags"  # Request.flags, kept through the codec

# -- one trip through the downloader (cleared on re-queue) -------------------------------------
RID = "larbin_rid"  # the scheduler record this request was popped from (to acknowledge)
LEASE = "larbin_lease"  # the IP whose connection the scheduler leased for this request
BORROW = "larbin_borrow"  # robots.txt fetched on the lease of the page that needed it
ROBOTS_FOR = "larbin_robots_for"  # a robots.txt fetch: the site it is read for (redirects keep it)
REDIRECT_URLS = "redirect_urls"  # Scrapy's: the URLs a redirected request came through
IP = "larbin_ip"  # the resolved IP the request is pinned to (dropped on a move to another host)
SENT = "larbin_sent"  # passed the politeness gate: its end starts the IP's delay
OWN = "larbin_own"  # holds a connection the politeness gate acquired itself
# set by the politeness gate, called by the lean HTTP handler with the time (time.monotonic)
# the request's bytes go to the connection: the IP's next request is paced from it
PACER = "larbin_pacer"
BANDWIDTH = "larbin_bandwidth"  # bytes the gate reserved for this fetch (LARBIN_BANDWIDTH_MAX)
DOWNLOAD_SLOT = "download_slot"  # Scrapy's: the scheduler sets the IP, the politeness gate the host
PROBE = "larbin_probe"  # its own timeout while LARBIN_HOST_SILENT_TIMEOUT stands in
DOWNLOAD_TIMEOUT = "download_timeout"  # Scrapy's: this request's page timeout, seconds

TRIP = (RID, LEASE, IP, SENT, OWN, BORROW, BANDWIDTH, DOWNLOAD_SLOT, PROBE, PACER)
DOWNLOAD_LATENCY = "download_latency"  # Scrapy's: the last download's duration (per trip)
PICKLED = "larbin_pickled"  # in a stored record only: meta values kept by pickle (opt-in)

#: The keys the disk frontier drops: they describe one trip or one moment, never what the
#: request asks for. Every other meta key is stored (``frontier/codec.py``).
TRANSIENT = frozenset((*TRIP, PARENT, REQUEUED, OUTPUT_DONE, ADMITTED, DOWNLOAD_LATENCY))


def seed_meta() -> dict[str, Any]:
    """The meta of a seed request, wherever it was read from (spider arguments, Redis)."""
    return {"depth": 0, SITE_DEPTH: 0}


def clear_trip(meta: dict[str, Any]) -> None:
    """Forget the keys of the last trip through the downloader (the request is queued again)."""
    for key in TRIP:
        meta.pop(key, None)


def stamp_lease(meta: dict[str, Any], rid: Any, ip: str) -> None:
    """Mark a request the scheduler hands out: its record and the IP connection it leased."""
    meta[RID] = rid
    meta[LEASE] = ip
    meta[IP] = ip
    meta[DOWNLOAD_SLOT] = ip
