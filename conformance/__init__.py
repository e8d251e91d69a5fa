"""``make conformance``: Scrapy's own tests of the parts ``larbinscrapy/lean/`` replaces."""
