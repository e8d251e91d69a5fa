"""Helpers the tests share; test modules import them from here (or from ``testweb``), never
from one another. ``conftest.py`` keeps the fixtures."""
