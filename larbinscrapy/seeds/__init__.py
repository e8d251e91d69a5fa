"""Where URLs enter the crawl: seed lists and each site's sitemaps.

Owns the seeds file format and the sitemap reader.
"""
