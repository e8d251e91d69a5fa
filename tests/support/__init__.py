"""Helpers the tests share (servers they start, waits on conditions); never test modules."""
