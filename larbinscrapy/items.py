"""The one item larbinscrapy yields: a fetched page and what larbin's parser found in it."""

from __future__ import annotations

import scrapy


class PageItem(scrapy.Item):
    """A fetched page.

    ``body`` (the raw response body) and ``headers`` are for the pipelines that store pages (the
    WARC pipeline archives the headers); the feed exporters leave both out (see
    ``FEED_EXPORT_FIELDS`` in ``settings/base.py``), so ``items.jsonl`` stays small.
    """

    url = scrapy.Field()  # final URL (after redirects)
    status = scrapy.Field()  # HTTP status
    depth = scrapy.Field()  # link depth from the seed (Scrapy's meta["depth"])
    referer = scrapy.Field()  # URL of the page that linked here, None for seeds
    fetched_at = scrapy.Field()  # UTC ISO-8601 time the response arrived
    content_type = scrapy.Field()  # Content-Type header, lower-cased, without parameters
    length = scrapy.Field()  # body length in bytes
    title = scrapy.Field()  # <title> text, whitespace collapsed
    keywords = scrapy.Field()  # <meta name="keywords"> content
    description = scrapy.Field()  # <meta name="description"> content
    links = scrapy.Field()  # absolute outlinks found in the page, fragments dropped, in page order
    ip = scrapy.Field()  # server IP the page was fetched from (larbin IPSite)
    body = scrapy.Field()  # raw body bytes, for storage pipelines; not exported to feeds
    headers = scrapy.Field()  # response headers {name: value}, repeats joined by ", "; not exported
    # with LARBIN_REVISIT on (larbinscrapy/revisit/): storage pipelines skip changed=False
    changed = scrapy.Field()  # content differs from the last fetch (True on the first; 304: False)
    fetch_count = scrapy.Field()  # fetches of this URL so far, this one included
    noindex = scrapy.Field()  # robots meta / X-Robots-Tag noindex (LARBIN_OBEY_NOINDEX): not stored
    canonical = scrapy.Field()  # <link rel="canonical"> target, absolute, or None


def storable(item: object) -> bool:
    """Whether a storage pipeline may keep ``item``: not a page that asked for noindex."""
    return not (isinstance(item, PageItem) and item.get("noindex"))
