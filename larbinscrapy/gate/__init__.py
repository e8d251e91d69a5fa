"""The link gate's core: larbin's check(), what a link must pass before it is queued.

Owns the URL filters, the trap budgets and the raw-link cache in front of the seen-set.
"""
