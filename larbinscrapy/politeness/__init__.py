"""Politeness: per-IP and per-host pacing, DNS pinned once, throttling pauses.

Owns the pure politeness state the frontier and the politeness middleware share.
"""
