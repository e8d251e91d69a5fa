"""Fetching a page the larbin way: its time limit and the types worth downloading.

Owns the page deadline handler and the content-type and decompression guards.
"""
