"""Distributed mode: many ``scrapy crawl larbin`` workers sharing one frontier in Redis.

``settings.distributed`` turns it on. ``frontier.RedisFrontier`` holds the frontier (Lua
scripts), ``scheduler.RedisScheduler`` is its Scrapy scheduler, ``dupefilter`` the shared
seen-URL bits (SETBIT), ``contentdup`` the shared content hashes. See docs/distributed.md.
"""
