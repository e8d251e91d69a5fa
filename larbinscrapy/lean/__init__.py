"""Engine replacements: faster stand-ins for Scrapy parts, behind LARBIN_LEAN_ENGINE.

Each module names what it replaces, the private names it uses and what would retire it.
"""
