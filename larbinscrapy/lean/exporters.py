"""``JsonLinesExporter``: Scrapy's JSON lines exporter, an item class's fields looked up once.

Replaces: ``JsonLinesItemExporter`` for ``jsonl``/``jsonlines`` feeds (``FEED_EXPORTERS``).
Scrapy's ``get_serialized_fields`` goes through ``ItemAdapter`` for every field of every item;
here the fields and their serializers are planned once per item class and each item is read from
its values directly: the same bytes, written the same way. Only where that plan is exactly
Scrapy's (``scrapy.Item`` items, a list of field names, ``serialize_field`` not overridden);
anything else goes through Scrapy's own code.
Private names: ``Item._values`` (read directly; ``Item.__getitem__``'s source checked), and the
sources of ``BaseItemExporter.get_serialized_fields``, ``serialize_field`` and
``JsonLinesItemExporter.export_item``, which the plan mirrors.
Retire when: Scrapy's exporters cache per-class field plans (or ``ItemAdapter`` gets cheap).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scrapy.exporters import BaseItemExporter, JsonLinesItemExporter
from scrapy.item import Item
from scrapy.utils.python import to_bytes

if TYPE_CHECKING:
    from collections.abc import Callable
    from io import BytesIO

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    ("scrapy.item", "Item.__getitem__", "e0f0a79859f1"),
    ("scrapy.exporters", "BaseItemExporter.get_serialized_fields", "cfd1610c2bf2"),
    ("scrapy.exporters", "BaseItemExporter.serialize_field", "c8b694a8f3b5"),
    ("scrapy.exporters", "JsonLinesItemExporter.export_item", "d687f3d55a45"),
)

Plan = list[tuple[str, "Callable[[Any], Any] | None"]]


class JsonLinesExporter(JsonLinesItemExporter):
    """``JsonLinesItemExporter`` with a per-class plan of the fields; see the module docstring."""

    def __init__(self, file: BytesIO, **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        fields = self.fields_to_export
        self._names: tuple[str, ...] | None = None
        if (
            fields is not None
            and not isinstance(fields, Mapping)
            and type(self).serialize_field is BaseItemExporter.serialize_field
        ):
            names = tuple(fields)
            if all(isinstance(name, str) for name in names):
                self._names = names
        self._plans: dict[type, Plan] = {}

    def export_item(self, item: Any) -> None:
        if self._names is None or not isinstance(item, Item):
            super().export_item(item)
            return
        plan = self._plans.get(type(item))
        if plan is None:
            plan = self._plans[type(item)] = self._plan(type(item))
        values = item._values  # Item's own storage: what item[name] and `name in item` read
        exported: dict[str, Any] = {}
        for name, serializer in plan:
            if name in values:
                value = values[name]
                exported[name] = value if serializer is None else serializer(value)
            elif self.export_empty_fields:
                exported[name] = None
        self.file.write(to_bytes(self.encoder.encode(exported) + "\n", self.encoding))

    def _plan(self, cls: type[Item]) -> Plan:
        """Each field to export with its declared serializer (None: the value as it is)."""
        assert self._names is not None
        no_field: dict[str, Any] = {}
        return [(name, cls.fields.get(name, no_field).get("serializer")) for name in self._names]
