"""Item pipelines: larbin's content-duplicate test and its save formats, plus WARC
(orders and settings: docs/pipelines.md)."""
