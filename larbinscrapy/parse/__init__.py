"""Parsing pages: larbin's html.cc link scanner and url.cc canonical URLs and hashes.

Pure functions over bytes and strings; no Scrapy component lives here.
"""
