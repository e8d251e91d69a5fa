"""Item pipelines: larbin's content-duplicate test and its save formats, plus WARC.

``contentdup`` (on by default, larbin ``NO_DUP``), ``simplesave`` (``SIMPLE_SAVE``),
``mirrorsave`` (``MIRROR_SAVE``), ``warc`` and ``sqlite_example`` (the worked example of
``docs/pipelines.md``). Orders and settings: ``docs/pipelines.md``.
"""
